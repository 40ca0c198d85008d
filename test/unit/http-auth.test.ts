// How often the HTTP layer asks client-node to authenticate (kube/http.ts AUTH_REUSE_MS): once a
// second for credentials client-node does not renew on a deadline, every request for the others.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { KubeConfig, type RequestContext, type User } from '@kubernetes/client-node';
import { AUTH_REUSE_MS, createKubeHttp } from '../../src/kube/http.ts';

describe('authentication of the requests', () => {
  let server: Server;
  let url: string;
  const seen: string[] = [];

  before(async () => {
    server = createServer((req, res) => {
      seen.push(req.headers.authorization ?? '');
      res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });

  /** A kubeconfig for `user` whose authentication is counted and names its call in the token. */
  function counted(user: User): { kc: KubeConfig; calls: () => number } {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: url, skipTLSVerify: true }],
      users: [user],
      contexts: [{ name: 'x', cluster: 'c', user: user.name }],
      currentContext: 'x',
    });
    let calls = 0;
    kc.applySecurityAuthentication = (context: RequestContext) => {
      calls += 1;
      context.setHeaderParam('Authorization', `Bearer call-${calls}`);
      return Promise.resolve();
    };
    return { kc, calls: () => calls };
  }

  async function requests(kc: KubeConfig, n: number): Promise<string[]> {
    seen.length = 0;
    const http = createKubeHttp(kc, 5_000);
    for (let i = 0; i < n; i += 1) await http.send('PATCH', '/apis/batch/v1/namespaces/a/jobs/j', { body: {}, ignoreAnswer: true });
    return [...seen];
  }

  it("a kubeconfig's token: one authentication serves the requests of the next second, then it is asked again", async () => {
    const { kc, calls } = counted({ name: 'u', token: 'static' });
    const clock = { ms: 0 };
    const http = createKubeHttp(kc, 5_000, () => clock.ms);
    seen.length = 0;
    for (let i = 0; i < 20; i += 1) await http.getJson('/version', {});
    assert.equal(calls(), 1);
    assert.deepEqual(new Set(seen), new Set(['Bearer call-1']), 'every request carried it');
    clock.ms = AUTH_REUSE_MS - 1;
    await http.getJson('/version', {});
    assert.equal(calls(), 1, 'still within the reuse time');
    clock.ms = AUTH_REUSE_MS;
    await http.getJson('/version', {});
    assert.equal(calls(), 2);
    assert.equal(seen.at(-1), 'Bearer call-2');
  });

  it('the in-cluster token file (client-node re-reads it once a minute): reused the same way', async () => {
    const { kc, calls } = counted({ name: 'sa', authProvider: { name: 'tokenFile', config: { tokenFile: '/nonexistent' } } });
    await requests(kc, 10);
    assert.equal(calls(), 1);
  });

  it('an exec plugin or another auth provider: asked for every request, so a renewed token is used at once', async () => {
    const exec = counted({ name: 'e', exec: { command: 'true', apiVersion: 'client.authentication.k8s.io/v1', interactiveMode: 'Never' } });
    assert.deepEqual(await requests(exec.kc, 5), ['Bearer call-1', 'Bearer call-2', 'Bearer call-3', 'Bearer call-4', 'Bearer call-5']);
    const oidc = counted({ name: 'o', authProvider: { name: 'oidc', config: {} } });
    await requests(oidc.kc, 5);
    assert.equal(oidc.calls(), 5);
  });
});
