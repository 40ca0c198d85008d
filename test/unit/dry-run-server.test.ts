// `--dry-run[=client|server]` (docs/contract.md "kubectl conventions"): the flag's forms, and the
// server-dry-run gateway's requests as they leave the sweeper (a local HTTP server records them;
// what the API server does with dryRun=All: test/e2e/dry-run-server.test.ts).
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { type EventsV1Event, KubeConfig } from '@kubernetes/client-node';
import { dryRunOptions } from '../../src/cli/dry-run.ts';
import { buildProgram, runCli } from '../../src/cli/program.ts';
import { createGateway, type KubeGateway } from '../../src/kube/gateway.ts';
import { withRetries } from '../../src/kube/retrying.ts';

const sink = (add: (s: string) => void = () => {}) =>
  new Writable({
    write: (chunk: Buffer, _e, done) => {
      add(chunk.toString());
      done();
    },
  });
const io = () => ({ stdout: sink(), stderr: sink(), readStdin: async () => '', onStopSignal: () => {} });

class Parsed extends Error {
  constructor(readonly opts: Record<string, unknown>) {
    super('parsed');
  }
}

/** The options commander hands the command's action (which is not run). */
async function parse(...argv: string[]): Promise<Record<string, unknown>> {
  const program = buildProgram(io(), () => {});
  program.hook('preAction', (_root, command) => {
    throw new Parsed(command.opts());
  });
  const error = await program.parseAsync(argv, { from: 'user' }).then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.ok(error instanceof Parsed, `${argv.join(' ')}: ${String(error)}`);
  return error.opts;
}

describe('--dry-run[=MODE]', () => {
  for (const command of [['sweep'], ['run', '--schedule', '* * * * *']]) {
    const name = command[0];
    it(`${name}: --dry-run alone, and before -n/--namespace, is client`, async () => {
      assert.equal((await parse(...command, '--dry-run')).dryRun, 'client');
      const short = await parse(...command, '--dry-run', '-n', 'x');
      assert.deepEqual([short.dryRun, short.namespace], ['client', ['x']]);
      const long = await parse(...command, '--dry-run', '--namespace', 'x');
      assert.deepEqual([long.dryRun, long.namespace], ['client', ['x']]);
    });

    it(`${name}: --dry-run=server, --dry-run=client and --dry-run server`, async () => {
      assert.equal((await parse(...command, '--dry-run=server')).dryRun, 'server');
      assert.equal((await parse(...command, '--dry-run=client')).dryRun, 'client');
      const spaced = await parse(...command, '--dry-run', 'server', '-n', 'x');
      assert.deepEqual([spaced.dryRun, spaced.namespace], ['server', ['x']]);
    });

    it(`${name}: without --dry-run there is no dry run`, async () => {
      assert.equal((await parse(...command, '-n', 'x')).dryRun, undefined);
    });
  }

  for (const args of [['--dry-run=none'], ['--dry-run', 'sever'], ['--dry-run=']]) {
    it(`sweep ${args.join(' ')}: bad usage, exit 2, one line naming the flag`, async () => {
      let stderr = '';
      const code = await runCli(['sweep', ...args], { ...io(), stderr: sink((s) => (stderr += s)) });
      assert.equal(code, 2);
      const [message] = stderr.split('\n');
      assert.match(message!, /option '--dry-run \[mode\]' argument '.*' is invalid\. Allowed choices are client, server\./);
      assert.doesNotMatch(stderr, /\n\s+at /);
    });
  }
});

describe("the flag's value as the sweep's options", () => {
  it('none: a live sweep; client and server: a dry run of that mode', () => {
    assert.deepEqual(dryRunOptions(undefined), { dryRun: false });
    assert.deepEqual(dryRunOptions('client'), { dryRun: true, dryRunMode: 'client' });
    assert.deepEqual(dryRunOptions('server'), { dryRun: true, dryRunMode: 'server' });
  });
});

describe('the server-dry-run gateway', () => {
  let server: Server;
  const seen: { method: string; path: string; dryRun: string | null }[] = [];
  let kc: KubeConfig;

  before(async () => {
    server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        // A DELETE with a body: the API server reads its options, dryRun among them, from the body only.
        const sent = req.method === 'DELETE' ? (JSON.parse(Buffer.concat(chunks).toString() || '{}') as { dryRun?: string[] }) : {};
        const dryRun = req.method === 'DELETE' ? (sent.dryRun?.join(',') ?? null) : url.searchParams.get('dryRun');
        seen.push({ method: req.method ?? '', path: url.pathname, dryRun });
        const body = req.method === 'GET' ? '{"kind":"Table","rows":[],"items":[]}' : '{}';
        res.writeHead(200, { 'Content-Type': 'application/json' }).end(body);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
      users: [{ name: 'u', token: 't' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });

  /** Every method of the gateway once; resolves to what the server saw. */
  async function callEach(gateway: KubeGateway): Promise<typeof seen> {
    seen.length = 0;
    const event = { metadata: { name: 'e' } } as EventsV1Event;
    const page = { limit: 1 };
    await gateway.listNamespaceNames(page);
    await gateway.listPodRows({ namespace: 'n', fieldSelector: '', ...page });
    await gateway.listAllPodRows({ fieldSelector: '', ...page });
    await gateway.readPod('n', 'p');
    await gateway.listPods({ namespace: 'n', ...page });
    await gateway.listJobs(page);
    await gateway.readJob('n', 'j');
    await gateway.readNamespace('n');
    await gateway.readConfigMap('n', 'c');
    await gateway.readCronJob('n', 'cj');
    await gateway.readJobSet('n', 'js');
    await gateway.readServerVersion();
    await gateway.mergePatchJob('n', 'j', {});
    await gateway.jsonPatchJob('n', 'j', []);
    await gateway.patchPodStatus('n', 'p', {});
    await gateway.deletePod('n', 'p', 'uid', '1', { gracePeriodSeconds: 0 });
    await gateway.createEvent('n', event);
    await gateway.mergePatchCronJob('n', 'cj', {});
    await gateway.mergePatchJobSet('n', 'js', {});
    await gateway.mergePatchPod('n', 'p', {});
    return [...seen];
  }

  const WRITES = 8;

  it('sends every write with dryRun=All and no read with it', async () => {
    const requests = await callEach(createGateway(kc).serverDryRun());
    const reads = requests.filter((r) => r.method === 'GET');
    const writes = requests.filter((r) => r.method !== 'GET');
    assert.equal(writes.length, WRITES);
    assert.deepEqual(
      writes.filter((w) => w.dryRun !== 'All'),
      [],
    );
    assert.equal(reads.length, requests.length - WRITES);
    assert.deepEqual(
      reads.filter((r) => r.dryRun !== null),
      [],
    );
  });

  it('the plain gateway sends no dryRun at all; the retrying one forwards the variant', async () => {
    assert.deepEqual(
      (await callEach(createGateway(kc))).filter((r) => r.dryRun !== null),
      [],
    );
    const retried = await callEach(withRetries(createGateway(kc)).serverDryRun());
    assert.deepEqual(
      retried.filter((r) => r.method !== 'GET').map((r) => r.dryRun),
      Array<string>(WRITES).fill('All'),
    );
    assert.deepEqual(
      retried.filter((r) => r.method === 'GET' && r.dryRun !== null),
      [],
    );
  });
});
