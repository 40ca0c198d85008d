// The built CLI as a user runs it: flags, files, exit statuses, output formats, the scheduled
// mode with its metrics endpoint, against the real control plane where a cluster is involved.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage } from 'node:http';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { type KubeConfig } from '@kubernetes/client-node';
import { parse, stringify } from 'yaml';
import { REPO, ensureBuilt, jsonLines, runCli, startCli } from '../support/cli.ts';
import { closedPort, freePort } from '../support/cluster.ts';
import { useTestCluster } from '../support/hooks.ts';
import { waitFor } from '../support/kubelet.ts';
import { assertFailedBySweeper, createStuckJob, sweeperEvents, trueCondition, readJob, waitForJobFailed } from '../support/sweeper.ts';

const TIMEOUT = { timeout: 180_000 };
const dir = mkdtempSync(join(tmpdir(), 'ips-cli-'));
let kc: KubeConfig;
let kubeconfig: string;
const env = useTestCluster((hooks) => {
  ensureBuilt();
  kc = hooks.kc;
  kubeconfig = hooks.cluster.kubeconfigPath;
});
const namespace = env.namespace;

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

describe('usage', () => {
  for (const command of [[], ['sweep'], ['run'], ['policy'], ['policy', 'validate'], ['policy', 'explain'], ['policy', 'schema']]) {
    it(`--help on "${command.join(' ') || '(root)'}" exits 0 and shows usage`, async () => {
      const r = await runCli([...command, '--help']);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /Usage: imagepull-sweeper/);
    });
  }

  it('shows examples for sweep and run', async () => {
    assert.match((await runCli(['sweep', '--help'])).stdout, /Examples:[\s\S]*sweep --dry-run/);
    assert.match((await runCli(['run', '--help'])).stdout, /Examples:[\s\S]*--schedule/);
  });

  const bad: [string, string[], RegExp][] = [
    ['an unknown flag', ['sweep', '--bogus'], /unknown option '--bogus'/],
    ['an unknown command', ['sweeep'], /unknown command/],
    ['a bad --output', ['sweep', '--output', 'yaml'], /--output/],
    ['both policy sources', ['sweep', '--policy-file', 'a', '--policy-configmap', 'b/c'], /cannot be used together/],
    ['a malformed --policy-configmap', ['sweep', '--policy-configmap', 'no-slash'], /expected NAMESPACE\/NAME/],
    ['a missing kubeconfig file', ['sweep', '--kubeconfig', '/no/such/file'], /no such file/],
    ['run without --schedule', ['run'], /--schedule/],
    ['a bad cron expression', ['run', '--schedule', '61 * * * *'], /--schedule/],
    ['too few cron fields', ['run', '--schedule', '* * *'], /expected 5 cron fields/],
    ['a bad time zone', ['run', '--schedule', '* * * * *', '--timezone', 'Mars/Olympus'], /unknown time zone/],
    ['a bad --listen', ['run', '--schedule', '* * * * *', '--listen', 'nowhere'], /HOST:PORT/],
    ['explain without --namespace', ['policy', 'explain'], /--namespace/],
  ];
  for (const [what, args, message] of bad) {
    it(`exits 2 on ${what}, with one clear message and no stack trace`, async () => {
      const r = await runCli(args);
      assert.equal(r.code, 2, `stdout: ${r.stdout}\nstderr: ${r.stderr}`);
      assert.match(r.stderr, message);
      assert.doesNotMatch(r.stderr, /\n\s+at /);
    });
  }

  it('--version prints the package version', async () => {
    const r = await runCli(['--version']);
    assert.equal(r.code, 0);
    assert.equal(r.stdout.trim(), (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string }).version);
  });

  it('exits 2 when there is no kubeconfig at all', async () => {
    const r = await runCli(['sweep'], { env: { KUBECONFIG: '', HOME: dir } });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /no kubeconfig found/);
  });

  it('exits 2 on an unknown --context', async () => {
    const r = await runCli(['sweep', '--kubeconfig', kubeconfig, '--context', 'nope']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--context nope: no such context/);
  });
});

describe('policy validate / schema', () => {
  it('accepts a valid policy file and a valid ConfigMap manifest', async () => {
    const raw = file('ok.yaml', 'defaults:\n  grace: { permanent: 30s }\nrules:\n  - name: ci\n    namespaces: ["ci-*"]\n');
    const r = await runCli(['policy', 'validate', raw]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /valid \(1 rule\(s\)\)/);
    const manifest = file(
      'cm.yaml',
      'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: imagepull-sweeper-policy\ndata:\n  policy.yaml: |\n    defaults:\n      action: report\n',
    );
    assert.equal((await runCli(['policy', 'validate', manifest])).code, 0);
  });

  it('prints every problem as FILE:LINE:COL path: message and exits 2', async () => {
    const bad = file(
      'bad.yaml',
      'defaults:\n  grace:\n    permanent: soon\n  colour: blue\nrules:\n  - name: x\n    namespaces: ["[oops"]\n',
    );
    const r = await runCli(['policy', 'validate', bad]);
    assert.equal(r.code, 2);
    const lines = r.stdout.trim().split('\n');
    assert.ok(
      lines.some((l) => l.startsWith(`${bad}:3:16 defaults.grace.permanent: `)),
      r.stdout,
    );
    assert.ok(
      lines.some((l) => l.startsWith(`${bad}:4:3 defaults.colour: `)),
      r.stdout,
    );
    assert.ok(
      lines.some((l) => l.startsWith(`${bad}:7:18 rules[0].namespaces[0]: `)),
      r.stdout,
    );
  });

  it("maps problems in a ConfigMap manifest to the manifest's own lines", async () => {
    const bad = file(
      'badcm.yaml',
      'kind: ConfigMap\napiVersion: v1\nmetadata: { name: p }\ndata:\n  policy.yaml: |\n    limits:\n      maxJobsPerSweep: -1\n',
    );
    const r = await runCli(['policy', 'validate', bad]);
    assert.equal(r.code, 2);
    assert.match(r.stdout, new RegExp(`^${bad}:7:24 limits\\.maxJobsPerSweep: `, 'm'));
  });

  it('reads stdin with "-"', async () => {
    const r = await runCli(['policy', 'validate', '-'], { input: 'rules:\n  - name: a\n    action: explode\n' });
    assert.equal(r.code, 2);
    assert.match(r.stdout, /^<stdin>:3:13 rules\[0\]\.action: /m);
  });

  it('exits 2 on a missing file', async () => {
    const r = await runCli(['policy', 'validate', join(dir, 'missing.yaml')]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /ENOENT|no such file/);
  });

  it('prints a JSON Schema that shows the defaults', async () => {
    const r = await runCli(['policy', 'schema']);
    assert.equal(r.code, 0);
    const schema = JSON.parse(r.stdout) as { properties: Record<string, unknown>; additionalProperties: unknown };
    assert.deepEqual(Object.keys(schema.properties).sort(), ['cronJobs', 'defaults', 'limits', 'rules']);
    assert.equal(schema.additionalProperties, false);
    assert.match(r.stdout, /"default": "2m"/);
  });
});

describe('policy explain', () => {
  it('shows the rule, effective values and their sources, with live namespace labels', TIMEOUT, async () => {
    const ns = await namespace('explain', { team: 'batch' });
    const policy = file(
      'explain.yaml',
      'rules:\n  - name: batch\n    namespaceSelector: { matchLabels: { team: batch } }\n    grace: { permanent: 30s }\n',
    );
    const r = await runCli([
      'policy',
      'explain',
      '--namespace',
      ns,
      '--policy-file',
      policy,
      '--kubeconfig',
      kubeconfig,
      '--output',
      'text',
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /Rule:\s+batch/);
    assert.match(r.stdout, /permanent\s+30s\s+\(from batch\)/);
    assert.match(r.stdout, /auth\s+10m\s+\(from defaults\)/);
    assert.match(r.stdout, /team=batch/);
    assert.match(r.stdout, /matches: batch \(namespaceSelector yes\)/);
  });

  it('works offline from a policy file, and says when selectors cannot see labels', async () => {
    const policy = file(
      'offline.yaml',
      'rules:\n  - name: by-label\n    namespaceSelector: { matchLabels: { team: batch } }\n    action: report\n',
    );
    const r = await runCli(['policy', 'explain', '--namespace', 'ci-1', '--policy-file', policy, '--output', 'text'], {
      env: { KUBECONFIG: '', HOME: dir },
    });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /Rule:\s+defaults/);
    assert.match(r.stdout, /no cluster connection/);
    assert.match(r.stdout, /Failed Jobs: confirmWithin 5m, forceDeleteAfter 1m /);
  });

  it('shows whether healing is on and where that came from, in text and JSON', async () => {
    const policy = file('heal.yaml', 'defaults: { heal: true }\nrules:\n  - name: strict\n    namespaces: ["prod-*"]\n    heal: false\n');
    const explain = (ns: string, output: string) =>
      runCli(['policy', 'explain', '--namespace', ns, '--policy-file', policy, '--output', output], { env: { KUBECONFIG: '', HOME: dir } });
    const on = await explain('ci-1', 'text');
    assert.equal(on.code, 0, on.stderr);
    assert.match(on.stdout, /^Heal: +on: a stuck pod is recreated once its cause is gone, within its Job's budget {2}\(from defaults\)$/m);
    assert.match((await explain('prod-1', 'text')).stdout, /^Heal: +off {2}\(from strict\)$/m);
    const json = JSON.parse((await explain('prod-1', 'json')).stdout) as { heal: boolean; sources: { heal: string } };
    assert.deepEqual([json.heal, json.sources.heal], [false, 'strict']);
  });

  it('shows forceDeleteAfter (0: never) with the other limits', async () => {
    const policy = file('never.yaml', 'limits: { forceDeleteAfter: 0, confirmWithin: 10m }\n');
    const text = await runCli(['policy', 'explain', '--namespace', 'ci-1', '--policy-file', policy, '--output', 'text'], {
      env: { KUBECONFIG: '', HOME: dir },
    });
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /Failed Jobs: confirmWithin 10m, forceDeleteAfter 0 \(never\)/);
    const json = await runCli(['policy', 'explain', '--namespace', 'ci-1', '--policy-file', policy, '--output', 'json'], {
      env: { KUBECONFIG: '', HOME: dir },
    });
    assert.equal(json.code, 0, json.stderr);
    const limits = (JSON.parse(json.stdout) as { limits: { confirmWithinSeconds: number; forceDeleteAfterSeconds: number } }).limits;
    assert.deepEqual([limits.confirmWithinSeconds, limits.forceDeleteAfterSeconds], [600, 0]);
  });

  it("applies a Job's grace annotation, clamped to maxGrace", TIMEOUT, async () => {
    const ns = await namespace('explainjob');
    await createStuckJob(kc, ns, 'slow', { stuckFor: 1, annotations: { 'imagepull-sweeper/grace': '3h' } });
    const policy = file('explain2.yaml', '{}\n');
    const r = await runCli([
      'policy',
      'explain',
      '--namespace',
      ns,
      '--job',
      'slow',
      '--policy-file',
      policy,
      '--kubeconfig',
      kubeconfig,
      '--output',
      'json',
    ]);
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout) as {
      rule: string;
      job: { grace: { override: { applied: number; clamped: boolean }; sources: Record<string, { kind: string; clamped: boolean }> } };
    };
    assert.equal(out.rule, 'defaults');
    assert.equal(out.job.grace.override.applied, 3600);
    assert.equal(out.job.grace.override.clamped, true);
    assert.deepEqual(out.job.grace.sources.permanent, { kind: 'annotation', clamped: true });
    const text = await runCli([
      'policy',
      'explain',
      '--namespace',
      ns,
      '--job',
      'slow',
      '--policy-file',
      policy,
      '--kubeconfig',
      kubeconfig,
      '--output',
      'text',
    ]);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /Grace for this Job:\n\s+permanent\s+1h\s+\(from annotation, clamped to maxGrace\)/);
  });

  it('agrees with the sweep that ignore: "True" ignores the Job', TIMEOUT, async () => {
    const ns = await namespace('explainignore');
    await createStuckJob(kc, ns, 'opted-out', { stuckFor: 9999, annotations: { 'imagepull-sweeper/ignore': 'True' } });
    const policy = file('explain-ignore.yaml', '{}\n');
    const json = await runCli([
      'policy',
      'explain',
      '--namespace',
      ns,
      '--job',
      'opted-out',
      '--policy-file',
      policy,
      '--kubeconfig',
      kubeconfig,
      '--output',
      'json',
    ]);
    assert.equal(json.code, 0, json.stderr);
    assert.equal((JSON.parse(json.stdout) as { job: { ignored: boolean } }).job.ignored, true);
    const text = await runCli([
      'policy',
      'explain',
      '--namespace',
      ns,
      '--job',
      'opted-out',
      '--policy-file',
      policy,
      '--kubeconfig',
      kubeconfig,
      '--output',
      'text',
    ]);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /Job:\s+opted-out\s+\(annotation imagepull-sweeper\/ignore=True: never touched\)/);
    const sweep = await runCli(['sweep', '--namespace', ns, '--policy-file', policy, '--kubeconfig', kubeconfig, '--output', 'json']);
    assert.equal(sweep.code, 0, sweep.stderr);
    const decision = jsonLines(sweep.stdout).find((l) => l.message === 'decision' && l.job === 'opted-out')!;
    assert.deepEqual([decision.action, decision.outcome], ['ignore', 'skipped']);
    assert.equal((await readJob(kc, ns, 'opted-out')).metadata?.annotations?.['imagepull-sweeper/failed-at'], undefined);
  });

  it('reads the policy ConfigMap and exits 2 for an invalid one', TIMEOUT, async () => {
    const ns = await namespace('explaincm');
    const { CoreV1Api } = await import('@kubernetes/client-node');
    await kc.makeApiClient(CoreV1Api).createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'p' }, data: { 'policy.yaml': 'defaults: { action: report }\n' } },
    });
    const ok = await runCli([
      'policy',
      'explain',
      '--namespace',
      'anything',
      '--policy-configmap',
      `${ns}/p`,
      '--kubeconfig',
      kubeconfig,
      '--output',
      'text',
    ]);
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /Action:\s+report\s+\(from defaults\)/);
    await kc.makeApiClient(CoreV1Api).createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'bad' }, data: { 'policy.yaml': 'defaults: { action: maybe }\n' } },
    });
    const bad = await runCli(['policy', 'explain', '--namespace', 'x', '--policy-configmap', `${ns}/bad`, '--kubeconfig', kubeconfig]);
    assert.equal(bad.code, 2);
  });
});

describe('sweep', () => {
  it('exits 3 with one line when the cluster cannot be reached', async () => {
    const port = await closedPort();
    const config = file('unreachable.kubeconfig', kubeconfigYaml(`https://127.0.0.1:${port}`, 'token'));
    const r = await runCli(['sweep', '--kubeconfig', config, '--policy-file', file('p0.yaml', '{}\n'), '--output', 'text'], {
      timeoutMs: 120_000,
    });
    assert.equal(r.code, 3, r.stdout + r.stderr);
    assert.match(r.stdout + r.stderr, /could not be reached.*nothing was changed/);
    assert.doesNotMatch(r.stdout + r.stderr, /\n\s+at /);
  });

  it('reaches the API server through the HTTP proxy its kubeconfig names (proxy-url)', async () => {
    const tunnels: string[] = [];
    const sockets: Socket[] = [];
    const proxy = createHttpServer();
    proxy.on('connect', (req: IncomingMessage, client: Socket, head: Buffer) => {
      tunnels.push(req.url ?? '');
      const target = new URL(`http://${req.url ?? ''}`);
      const upstream = connect(Number(target.port), target.hostname, () => {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        upstream.write(head);
        upstream.pipe(client);
        client.pipe(upstream);
      });
      sockets.push(client, upstream);
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const { port } = proxy.address() as { port: number };
    try {
      const config = parse(readFileSync(kubeconfig, 'utf8')) as { clusters: { cluster: Record<string, string> }[] };
      for (const c of config.clusters) c.cluster['proxy-url'] = `http://127.0.0.1:${port}`;
      const server = new URL(config.clusters[0]!.cluster.server!);
      const ns = await namespace('proxied');
      const r = await runCli([
        'sweep',
        '--dry-run',
        '--kubeconfig',
        file('proxied.kubeconfig', stringify(config)),
        '--namespace',
        ns,
        '--policy-file',
        file('p-proxy.yaml', '{}\n'),
        '--output',
        'json',
      ]);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      assert.ok(jsonLines(r.stdout).some((l) => l.message === 'summary'));
      assert.ok(tunnels.length > 0, 'no request went through the proxy');
      assert.deepEqual([...new Set(tunnels)], [server.host]);
    } finally {
      for (const s of sockets) s.destroy();
      proxy.close();
    }
  });

  it('gives up on an API server that never answers (--request-timeout) and exits 3', async () => {
    const sockets: Socket[] = [];
    const blackHole = createServer((socket) => void sockets.push(socket));
    await new Promise<void>((resolve) => blackHole.listen(0, '127.0.0.1', resolve));
    const { port } = blackHole.address() as { port: number };
    try {
      const config = file('blackhole.kubeconfig', kubeconfigYaml(`https://127.0.0.1:${port}`, 'token'));
      const started = Date.now();
      const r = await runCli([
        'sweep',
        '--kubeconfig',
        config,
        '--policy-file',
        file('p-bh.yaml', '{}\n'),
        '--request-timeout',
        '500ms',
        '--output',
        'text',
      ]);
      assert.equal(r.code, 3, r.stdout + r.stderr);
      assert.match(r.stdout, /could not be reached \(ETIMEDOUT: no answer within the request timeout\)/);
      assert.ok(Date.now() - started < 30_000);
      assert.ok(sockets.length >= 2, 'the list was retried');
    } finally {
      for (const s of sockets) s.destroy();
      blackHole.close();
    }
  });

  it('exits 2 on a bad --request-timeout', async () => {
    const r = await runCli(['sweep', '--request-timeout', 'soon']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--request-timeout soon/);
  });

  it('exits 3 when the cluster refuses the credentials', async () => {
    const config = parse(readFileSync(kubeconfig, 'utf8')) as { users: { user: { token?: string } }[] };
    for (const u of config.users) u.user.token = 'not-a-valid-token';
    const r = await runCli(['sweep', '--kubeconfig', file('badtoken.kubeconfig', JSON.stringify(config)), '--output', 'json']);
    assert.equal(r.code, 3, r.stdout + r.stderr);
    assert.match(r.stdout, /refused the credentials/);
  });

  it('--dry-run --output text says what it would do and changes nothing; json gives audit lines', TIMEOUT, async () => {
    const ns = await namespace('clisweep');
    await createStuckJob(kc, ns, 'broken', { stuckFor: 9999 });
    const policy = file('p1.yaml', '{}\n');
    const dry = await runCli([
      'sweep',
      '--dry-run',
      '--namespace',
      ns,
      '--policy-file',
      policy,
      '--kubeconfig',
      kubeconfig,
      '--output',
      'text',
    ]);
    assert.equal(dry.code, 0, dry.stderr);
    assert.match(dry.stdout, new RegExp(`WOULD FAIL\\s+${ns}/job/broken`));
    assert.match(dry.stdout, /Dry run [0-9a-f]{8}: 1 decision\(s\) \(1 would fail\)/);
    assert.doesNotMatch(dry.stdout, /\bfailed\b/);
    const dryJson = jsonLines(
      (await runCli(['sweep', '--dry-run', '--namespace', ns, '--policy-file', policy, '--kubeconfig', kubeconfig, '--output', 'json']))
        .stdout,
    );
    assert.equal(dryJson.find((l) => l.message === 'decision')?.outcome, 'would-fail');
    const drySummary = dryJson.find((l) => l.message === 'summary')!;
    assert.equal((drySummary.outcomes as Record<string, number>)['would-fail'], 1);
    assert.equal((drySummary.outcomes as Record<string, number>).failed, undefined);

    // `run --dry-run`: the metrics count would-fail, never failed.
    const port = await freePort();
    const proc = startCli([
      'run',
      '--dry-run',
      '--schedule',
      '* * * * * *',
      '--namespace',
      ns,
      '--policy-file',
      policy,
      '--kubeconfig',
      kubeconfig,
      '--listen',
      `127.0.0.1:${port}`,
      '--output',
      'json',
    ]);
    try {
      await waitFor(() => jsonLines(proc.output()).some((l) => l.message === 'summary'), 30_000, 'a first dry-run sweep');
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      assert.match(metrics, /imagepull_sweeper_decisions_total\{outcome="would-fail"\} [1-9]/);
      assert.doesNotMatch(metrics, /outcome="failed"/);
    } finally {
      proc.child.kill('SIGTERM');
    }
    assert.equal(await proc.exited, 0, proc.output());
    assert.equal((await sweeperEvents(kc, ns)).length, 0);
    assert.equal((await readJob(kc, ns, 'broken')).metadata?.annotations?.['imagepull-sweeper/failed-at'], undefined);

    const real = await runCli(['sweep', '--namespace', ns, '--policy-file', policy, '--kubeconfig', kubeconfig, '--output', 'json']);
    assert.equal(real.code, 0, real.stderr);
    const lines = jsonLines(real.stdout);
    const decision = lines.find((l) => l.message === 'decision')!;
    assert.equal(decision.outcome, 'failed');
    assert.equal(decision.job, 'broken');
    assert.equal(decision.dryRun, false);
    const summary = lines.find((l) => l.message === 'summary')!;
    assert.equal((summary.outcomes as Record<string, number>).failed, 1);
    assertFailedBySweeper(await waitForJobFailed(kc, ns, 'broken'));
  });

  it('exits 2 on an invalid policy file and changes nothing', TIMEOUT, async () => {
    const ns = await namespace('clibad');
    await createStuckJob(kc, ns, 'broken', { stuckFor: 9999 });
    const r = await runCli([
      'sweep',
      '--namespace',
      ns,
      '--policy-file',
      file('bad2.yaml', 'limits: { maxJobsPerSweep: lots }\n'),
      '--kubeconfig',
      kubeconfig,
      '--output',
      'text',
    ]);
    assert.equal(r.code, 2);
    assert.match(r.stdout, /bad2\.yaml:1:28 limits\.maxJobsPerSweep/);
    assert.equal(trueCondition(await readJob(kc, ns, 'broken'), 'Failed'), undefined);
    assert.equal((await readJob(kc, ns, 'broken')).metadata?.annotations?.['imagepull-sweeper/failed-at'], undefined);
  });
});

describe('run', () => {
  it('sweeps on schedule, serves /healthz and /metrics, re-reads the policy, and exits 0 on SIGTERM', TIMEOUT, async () => {
    const ns = await namespace('clirun');
    await createStuckJob(kc, ns, 'first', { stuckFor: 9999 });
    const policy = file('run.yaml', 'defaults: { action: report }\n');
    const port = await freePort();
    const proc = startCli([
      'run',
      '--schedule',
      '*/2 * * * * *',
      '--namespace',
      ns,
      '--policy-file',
      policy,
      '--kubeconfig',
      kubeconfig,
      '--listen',
      `127.0.0.1:${port}`,
      '--output',
      'json',
    ]);
    try {
      await waitFor(() => jsonLines(proc.output()).some((l) => l.message === 'summary'), 30_000, 'a first sweep');
      const firstDecision = jsonLines(proc.output()).find((l) => l.message === 'decision')!;
      assert.equal(firstDecision.outcome, 'reported');
      assert.ok(jsonLines(proc.output()).some((l) => l.message === 'next sweep scheduled'));

      const health = await fetch(`http://127.0.0.1:${port}/healthz`);
      assert.equal(health.status, 200);
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      assert.match(metrics, /imagepull_sweeper_sweeps_total\{result="ok"\} [1-9]/);
      assert.match(metrics, /imagepull_sweeper_decisions_total\{outcome="reported"\} [1-9]/);
      assert.match(metrics, /imagepull_sweeper_last_sweep_timestamp_seconds \d/);
      assert.match(metrics, /imagepull_sweeper_sweep_duration_seconds_count [1-9]/);

      writeFileSync(policy, 'defaults: { action: fail }\n');
      await waitForJobFailed(kc, ns, 'first', 60_000);
      assert.ok(jsonLines(proc.output()).some((l) => l.message === 'decision' && l.outcome === 'failed'));
    } finally {
      proc.child.kill('SIGTERM');
    }
    assert.equal(await proc.exited, 0, proc.output());
    assert.match(proc.output(), /stop requested/);
    const ids = new Set(
      jsonLines(proc.output())
        .filter((l) => l.message === 'summary')
        .map((l) => l.sweepId),
    );
    assert.ok(ids.size >= 2);
  });
});

function kubeconfigYaml(server: string, token: string): string {
  return `apiVersion: v1
kind: Config
clusters: [{ name: c, cluster: { server: "${server}", insecure-skip-tls-verify: true } }]
users: [{ name: u, user: { token: ${token} } }]
contexts: [{ name: ctx, context: { cluster: c, user: u } }]
current-context: ctx
`;
}
