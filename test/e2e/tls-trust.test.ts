// TLS trust failures (unknown CA, self-signed, host name mismatch) and refused credentials: the
// built CLI exits 3 at once, without retrying, with a message an operator can act on. A
// faithful proxy (test/support/fault-proxy.ts, no faults) serves the untrusted certificates.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { parse, stringify } from 'yaml';
import { ensureBuilt, runCli, type Exec } from '../support/cli.ts';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.ts';
import { useTestCluster } from '../support/hooks.ts';

const dir = mkdtempSync(join(tmpdir(), 'ips-trust-'));
const POLICY = join(dir, 'policy.yaml');
writeFileSync(POLICY, '{}\n');
let adminKubeconfig: string;
const env = useTestCluster((hooks) => {
  ensureBuilt();
  adminKubeconfig = hooks.cluster.kubeconfigPath;
});

function caOf(kubeconfigPath: string): string {
  const cfg = parse(readFileSync(kubeconfigPath, 'utf8')) as { clusters: { cluster: Record<string, string> }[] };
  return Buffer.from(cfg.clusters[0]!.cluster['certificate-authority-data']!, 'base64').toString('utf8');
}

describe('a cluster that cannot be trusted or refuses the credentials', () => {
  const kc2 = join(dir, 'broken.kubeconfig');
  const proxies: FaultProxy[] = [];
  after(async () => {
    for (const p of proxies) await p.close();
  });

  /** A proxy that forwards faithfully (no faults) but whose certificate is not the one the kubeconfig trusts. */
  async function forwardingProxy(altNames?: string[]): Promise<FaultProxy> {
    const proxy = await startFaultProxy({
      upstream: env.cluster.server,
      upstreamCa: caOf(adminKubeconfig),
      seed: 1,
      faultRate: 0,
      altNames,
    });
    proxies.push(proxy);
    return proxy;
  }

  function kubeconfigWith(server: string, caPem: string | undefined, token?: string): string {
    const cfg = parse(readFileSync(adminKubeconfig, 'utf8')) as {
      clusters: { cluster: Record<string, string> }[];
      users: { user: Record<string, string> }[];
    };
    cfg.clusters[0]!.cluster.server = server;
    if (caPem === undefined) delete cfg.clusters[0]!.cluster['certificate-authority-data'];
    else cfg.clusters[0]!.cluster['certificate-authority-data'] = Buffer.from(caPem).toString('base64');
    if (token !== undefined) cfg.users[0]!.user.token = token;
    writeFileSync(kc2, stringify(cfg));
    return kc2;
  }

  function sweepOnce(kubeconfig: string, ns: string): Promise<Exec> {
    return runCli(['sweep', '--kubeconfig', kubeconfig, '--policy-file', POLICY, '--output', 'json', '--namespace', ns], {
      timeoutMs: 170_000,
    });
  }

  // Each case: the kubeconfig, and the proxy the CLI talks to (which counts its attempts).
  const cases: [string, () => Promise<[string, FaultProxy]>, RegExp][] = [
    [
      "an unknown CA (the proxy's, not trusted by the kubeconfig)",
      async () => {
        const proxy = await forwardingProxy();
        return [kubeconfigWith(proxy.url, caOf(adminKubeconfig)), proxy];
      },
      /TLS certificate is not trusted: .*(unable to verify|self-signed)/,
    ],
    [
      'a self-signed certificate with no CA configured',
      async () => {
        const proxy = await forwardingProxy();
        return [kubeconfigWith(proxy.url, undefined), proxy];
      },
      /TLS certificate is not trusted: .*(unable to verify|self-signed)/,
    ],
    [
      'a host name that does not match the certificate',
      async () => {
        const proxy = await forwardingProxy(['DNS:api.example.invalid']);
        return [kubeconfigWith(proxy.url, proxy.caPem), proxy];
      },
      /TLS certificate is not trusted: .*(altnames|does not match)/,
    ],
    [
      'a token the cluster does not know',
      async () => {
        const proxy = await forwardingProxy();
        return [kubeconfigWith(proxy.url, proxy.caPem, 'not-a-known-token'), proxy];
      },
      /the cluster refused the credentials \(401 Unauthorized\); nothing was changed/,
    ],
  ];
  for (const [what, setup, message] of cases) {
    it(`exits 3 at once, without retrying, on ${what}`, { timeout: 240_000 }, async () => {
      const ns = await env.namespace('trust');
      const [kubeconfig, proxy] = await setup();
      const r = await sweepOnce(kubeconfig, ns);
      const text = r.stdout + r.stderr;
      assert.equal(r.code, 3, text);
      assert.match(text, message);
      assert.doesNotMatch(text, /HTTP-Code|retrying /);
      // No request was tried twice: the sweep's first reads are the namespace's two pod lists
      // (Pending, and Running pods restarted in place), sent together, each over its own
      // connection, and at most those two requests were refused.
      const { connections, requests } = proxy.stats();
      assert.ok(connections >= 1 && connections <= 2, `${connections} connections`);
      assert.ok(requests <= 2, `${requests} requests`);
    });
  }
});
