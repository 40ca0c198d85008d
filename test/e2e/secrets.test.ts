// No token or key material from the kubeconfig in any output, on any path. Every CLI run in the
// e2e suite is already checked against the test cluster's token (test/support/cli.ts); here a
// kubeconfig that also carries a client key goes down every path that prints something.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parse, stringify } from 'yaml';
import { assertNoSecrets, ensureBuilt, registerKubeconfigSecrets, runCli, startCli } from '../support/cli.ts';
import { closedPort } from '../support/cluster.ts';
import { makeCertificates, startFaultProxy, type FaultProxy } from '../support/fault-proxy.ts';
import { useTestCluster } from '../support/hooks.ts';
import { createStuckJob } from '../support/sweeper.ts';

const dir = mkdtempSync(join(tmpdir(), 'ips-secrets-'));
let admin: string;
const env = useTestCluster((hooks) => {
  ensureBuilt();
  admin = hooks.cluster.kubeconfigPath;
});

interface Kubeconfig {
  clusters: { name: string; cluster: Record<string, string> }[];
  users: { name: string; user: Record<string, string> }[];
  contexts: { name: string; context: Record<string, string> }[];
}

/** The admin kubeconfig plus a client certificate and key, with edits; registered as secret. */
function kubeconfig(name: string, edit: (cfg: Kubeconfig) => void = () => {}): string {
  const cfg = parse(readFileSync(admin, 'utf8')) as Kubeconfig;
  const client = makeCertificates(mkdtempSync(join(dir, 'client-')), ['DNS:client'], 'client');
  cfg.users[0]!.user['client-certificate-data'] = Buffer.from(client.certPem).toString('base64');
  cfg.users[0]!.user['client-key-data'] = Buffer.from(client.keyPem).toString('base64');
  edit(cfg);
  const path = join(dir, name);
  writeFileSync(path, stringify(cfg, { lineWidth: 0 }));
  registerKubeconfigSecrets(path);
  return path;
}

describe('secrets', () => {
  let ns: string;
  let proxy: FaultProxy;
  before(async () => {
    ns = await env.namespace('secrets');
    await createStuckJob(env.kc, ns, 'stuck', { stuckFor: 9999 });
    proxy = await startFaultProxy({ upstream: env.cluster.server, upstreamCa: caOf(admin), seed: 7, faultRate: 0 });
  });
  after(async () => proxy?.close());

  const policy = () => {
    const path = join(dir, 'policy.yaml');
    writeFileSync(path, '{}\n');
    return path;
  };

  const paths: [string, () => Promise<string[]>][] = [
    [
      'a dry run (json)',
      async () => [
        'sweep',
        '--dry-run',
        '--kubeconfig',
        kubeconfig('ok'),
        '--namespace',
        ns,
        '--policy-file',
        policy(),
        '--output',
        'json',
      ],
    ],
    [
      'a sweep (text)',
      async () => ['sweep', '--kubeconfig', kubeconfig('ok-text'), '--namespace', ns, '--policy-file', policy(), '--output', 'text'],
    ],
    [
      'an invalid policy file',
      async () => {
        const bad = join(dir, 'bad.yaml');
        writeFileSync(bad, 'defaults:\n  action: explode\n');
        return ['sweep', '--kubeconfig', kubeconfig('bad-policy'), '--namespace', ns, '--policy-file', bad];
      },
    ],
    [
      'a policy ConfigMap that does not exist',
      async () => ['sweep', '--kubeconfig', kubeconfig('no-cm'), '--namespace', ns, '--policy-configmap', `${ns}/nothing`],
    ],
    [
      'a token the cluster refuses',
      async () => [
        'sweep',
        '--kubeconfig',
        kubeconfig('refused', (c) => (c.users[0]!.user.token = `refused-${c.users[0]!.user.token}`)),
        '--namespace',
        ns,
        '--policy-file',
        policy(),
      ],
    ],
    [
      'an API server that is not there',
      async () => {
        const port = await closedPort();
        return [
          'sweep',
          '--kubeconfig',
          kubeconfig('down', (c) => (c.clusters[0]!.cluster.server = `https://127.0.0.1:${port}`)),
          '--namespace',
          ns,
          '--policy-file',
          policy(),
          '--request-timeout',
          '2s',
        ];
      },
    ],
    [
      'an untrusted certificate',
      async () => [
        'sweep',
        '--kubeconfig',
        kubeconfig('untrusted', (c) => (c.clusters[0]!.cluster.server = proxy.url)),
        '--namespace',
        ns,
        '--policy-file',
        policy(),
      ],
    ],
    ['an unknown --context', async () => ['sweep', '--kubeconfig', kubeconfig('ctx'), '--context', 'elsewhere', '--policy-file', policy()]],
    [
      'a kubeconfig that is not valid YAML',
      async () => {
        const path = kubeconfig('broken-yaml');
        const text = readFileSync(path, 'utf8').replace(/(token: .*)/, '$1\n   : [unclosed');
        writeFileSync(path, text);
        return ['sweep', '--kubeconfig', path, '--policy-file', policy()];
      },
    ],
    [
      'a kubeconfig whose user is not a mapping',
      async () => {
        const path = kubeconfig('bad-user');
        writeFileSync(path, readFileSync(path, 'utf8').replace(/users:\n/, 'users:\n  - notauser\n'));
        return ['sweep', '--kubeconfig', path, '--policy-file', policy()];
      },
    ],
    [
      'policy explain with --job',
      async () => [
        'policy',
        'explain',
        '--kubeconfig',
        kubeconfig('explain'),
        '--namespace',
        ns,
        '--job',
        'stuck',
        '--policy-file',
        policy(),
        '--output',
        'json',
      ],
    ],
  ];
  for (const [what, args] of paths) {
    it(`${what}: no token or key material in the output`, { timeout: 240_000 }, async () => {
      // runCli rejects when the output holds a registered secret.
      const r = await runCli(await args(), { timeoutMs: 170_000 });
      assert.notEqual(r.code, null, 'the CLI ended by itself');
      assertNoSecrets(r.stdout + r.stderr);
    });
  }

  it('run mode, stopped by SIGTERM: no token or key material in the output', { timeout: 240_000 }, async () => {
    const cli = startCli([
      'run',
      '--schedule',
      '* * * * * *',
      '--kubeconfig',
      kubeconfig('run'),
      '--namespace',
      ns,
      '--policy-file',
      policy(),
      '--dry-run',
      '--output',
      'json',
    ]);
    for (let i = 0; i < 1500 && !cli.output().includes('"summary"'); i += 1) await new Promise((r) => setTimeout(r, 100));
    cli.child.kill('SIGTERM');
    assert.equal(await cli.exited, 0);
    assert.match(cli.output(), /"summary"/);
  });
});

function caOf(kubeconfigPath: string): string {
  const cfg = parse(readFileSync(kubeconfigPath, 'utf8')) as Kubeconfig;
  return Buffer.from(cfg.clusters[0]!.cluster['certificate-authority-data']!, 'base64').toString('utf8');
}
