// Every image-pull failure class from a real pull on the real node of each runtime of the run
// (kubelet + containerd 1.6 / 2.x or CRI-O + local registries, and loopback stand-ins for 429, 503
// and an untrusted certificate), with the message the real kubelet writes, judged by the sweeper
// (dry run). CRI-O also gets the cases only its config makes (node-cases-crio.ts).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { useTestCluster } from '../support/hooks.ts';
import { waitFor } from '../support/kubelet.ts';
import {
  addRegistryHost,
  nodeSkipReason,
  removeRegistryHost,
  runtimeLabel,
  testNode,
  testRuntimes,
  type NodeRuntime,
  type TestNodeHandle,
} from '../support/node.ts';
import {
  caseContainerStatus,
  createCasePod,
  faultHostsFor,
  faultRetryAfterSeconds,
  nodeCases,
  nodePodSpec,
  observeReasons,
  registryFaultCases,
  type FaultHosts,
  type NodeCase,
} from '../support/node-cases.ts';
import { crioCases, prepareCrioCases } from '../support/node-cases-crio.ts';
import { startFaultRegistries, type FaultRegistries } from '../support/registry-faults.ts';
import { policyFile, runSweep, type SweepRun } from '../support/sweeper.ts';
import { assertProtobufReadsAsJson } from '../support/watch-protobuf.ts';

const skip = nodeSkipReason();
const env = useTestCluster();
// Each test (not the suite) is skipped, so the runner counts them as skipped, with the reason.
const TIMEOUT = { timeout: 180_000, skip };

/**
 * The cause each case's ErrImagePull message must state, as each runtime words it (recorded on the
 * test node by `npm run record:node-statuses`: test/fixtures/real-node-statuses*.json).
 */
const CONTAINERD_16: Record<string, RegExp> = {
  'repo-missing':
    /^rpc error: code = NotFound desc = failed to pull and unpack image ".*": failed to resolve reference ".*": .*: not found$/,
  'tag-missing':
    /^rpc error: code = NotFound desc = failed to pull and unpack image ".*": failed to resolve reference ".*": .*: not found$/,
  'auth-no-secret': /401 Unauthorized/,
  'auth-wrong-password': /401 Unauthorized/,
  'unresolvable-host': /lookup registry\.no-such-host\.invalid.*no such host/,
  'connection-refused': /connect: connection refused/,
  'invalid-name': /invalid reference format/,
  'never-pull': /is not present with pull policy of Never/,
  'init-container': /not found/,
  sidecar: /not found/,
  'too-many-requests': /failed with status code \[manifests 1\]: 429 Too Many Requests$/,
  'too-many-requests-on-fetch': /429 Too Many Requests - Server message: toomanyrequests: /,
  'service-unavailable': /failed with status code \[manifests 1\]: 503 Service Unavailable$/,
  'token-unavailable': /failed to authorize: failed to fetch anonymous token: unexpected status: 503 Service Unavailable$/,
  'untrusted-certificate': /x509: certificate signed by unknown authority$/,
};
// containerd 2 pulls through its transfer service: `failed to resolve image` (core/transfer/local/pull.go).
const CONTAINERD_2: Record<string, RegExp> = {
  ...CONTAINERD_16,
  'repo-missing': /^rpc error: code = NotFound desc = failed to pull and unpack image ".*": failed to resolve image: .*: not found$/,
  'tag-missing': /^rpc error: code = NotFound desc = failed to pull and unpack image ".*": failed to resolve image: .*: not found$/,
  // core/remotes/docker/authorizer.go: no credentials for a 401 challenge.
  'auth-no-secret':
    /^failed to pull and unpack image ".*": failed to resolve image: pull access denied, repository does not exist or may require authorization: authorization failed: no basic auth credentials$/,
  // core/remotes/errors/errors.go: "unexpected status from %s request to %s: %s".
  'too-many-requests':
    /: failed to resolve image: unexpected status from HEAD request to http:\/\/.*\/manifests\/1: 429 Too Many Requests$/,
  'too-many-requests-on-fetch':
    /failed to copy: httpReadSeeker: failed open: unexpected status from GET request to http:\/\/.*\/manifests\/sha256:[0-9a-f]{64}: 429 Too Many Requests\ntoomanyrequests: /,
  'service-unavailable':
    /: failed to resolve image: unexpected status from HEAD request to http:\/\/.*\/manifests\/1: 503 Service Unavailable$/,
  'token-unavailable':
    /failed to authorize: failed to fetch anonymous token: unexpected status from GET request to http:\/\/.*\/token\?.*: 503 Service Unavailable$/,
};
// CRI-O 1.34 tries an OCI artifact pull first (internal/storage/image.go: "unable to try pulling
// possible OCI artifact: %w", internal/ociartifact/store.go: "build image source: %w"), then
// containers/image v5.35's words; a refused connection is RegistryUnavailable and a policy refusal
// SignatureValidationFailed (server/image_pull.go), worded by the kubelet ("image pull failed for
// X because ..."). Recorded on the test node by `npm run record:node-statuses`.
const CRIO_PREFIX = '^unable to try pulling possible OCI artifact: build image source: ';
const crio = (rest: string): RegExp => new RegExp(CRIO_PREFIX + rest);
const CRIO: Record<string, RegExp> = {
  'repo-missing': crio(String.raw`reading manifest 1 in .*: manifest unknown$`),
  'tag-missing': crio(String.raw`reading manifest no-such-tag in .*: manifest unknown$`),
  'auth-no-secret': crio(String.raw`reading manifest 1 in .*: authentication required$`),
  // A 401 to the manifest GET, whether or not credentials went with it (docker/errors.go words a
  // failed token fetch with credentials as "invalid username/password").
  'auth-wrong-password': crio(String.raw`(?:reading manifest 1 in .*: authentication required|.*invalid username/password: .*)$`),
  'unresolvable-host': crio(
    String.raw`pinging container registry registry\.no-such-host\.invalid: .*lookup registry\.no-such-host\.invalid.*no such host$`,
  ),
  'connection-refused':
    /^image pull failed for .* because the registry is unavailable: unable to try pulling possible OCI artifact: .*connect: connection refused$/,
  'invalid-name': /invalid reference format/,
  'never-pull': /is not present with pull policy of Never/,
  'init-container': /manifest unknown$/,
  sidecar: /manifest unknown$/,
  'too-many-requests': crio(String.raw`pinging container registry .*: toomanyrequests: too many requests, retry later$`),
  'too-many-requests-on-fetch': crio(String.raw`pinging container registry .*: toomanyrequests: You have reached your pull rate limit\.`),
  'service-unavailable': crio(String.raw`pinging container registry .*: received unexpected HTTP status: 503 Service Unavailable$`),
  'token-unavailable': crio(String.raw`Requesting bearer token: received unexpected HTTP status: 503 Service Unavailable$`),
  'untrusted-certificate': crio(
    String.raw`pinging container registry 0\.0\.0\.0:\d+: Get "https://0\.0\.0\.0:\d+/v2/": tls: failed to verify certificate: x509: certificate signed by unknown authority$`,
  ),
  'short-name':
    /^Failed to inspect image "": rpc error: code = Unknown desc = short-name "app:1" did not resolve to an alias and no unqualified-search registries are defined in ".*"$/,
  'signature-required':
    /^image pull failed for .* because the signature validation failed: Source image rejected: A signature was required, but no signature exists$/,
  'platform-mismatch':
    /^choosing an image from manifest list docker:\/\/.*: no image found in image index for architecture "amd64", variant "", OS "linux"$/,
};
const CAUSES: Partial<Record<NodeRuntime, Record<string, RegExp>>> = { containerd: CONTAINERD_16, containerd2: CONTAINERD_2, crio: CRIO };

for (const runtime of testRuntimes())
  describe(`real pulls on the real node: ${runtimeLabel(runtime)}`, () => {
    const causes = CAUSES[runtime];
    if (!causes) throw new Error(`node-pull.test.ts has no expected messages for ${runtime}`);
    let node: TestNodeHandle;
    let ns: string;
    let cases: NodeCase[];
    const seen = new Map<string, Map<string, V1Pod>>();
    let dryRun: SweepRun;
    let faults: FaultRegistries | undefined;
    let hosts: FaultHosts;

    before(async () => {
      if (skip) return;
      node = await testNode(env.cluster.kubeconfigPath, { runtime });
      ns = await env.namespace(`node-pull-${runtime}`);
      faults = await startFaultRegistries({ retryAfterSeconds: faultRetryAfterSeconds(runtime) });
      hosts = faultHostsFor(runtime, faults);
      for (const h of Object.values(hosts)) await addRegistryHost(node, h, h === hosts.untrusted ? 'https' : 'http');
      if (runtime === 'crio') await prepareCrioCases(node, ns);
      cases = [...(await nodeCases(node)), ...registryFaultCases(node, hosts), ...(runtime === 'crio' ? crioCases(node) : [])];
      await Promise.all(cases.map((c) => createCasePod(env.kc, ns, c.id, c)));
      await Promise.all(
        cases.map(async (c) => {
          seen.set(c.id, await observeReasons(env.kc, ns, c.id, c));
        }),
      );
      dryRun = await runSweep(env.kc, { namespaces: [ns], policy: policyFile('{}'), dryRun: true });
    });

    after(async () => {
      if (!faults) return;
      await faults.close();
      for (const h of Object.values(hosts)) await removeRegistryHost(node, h);
    });

    const one = (id: string): { c: NodeCase; forms: Map<string, V1Pod> } => {
      const c = cases.find((x) => x.id === id);
      const forms = seen.get(id);
      assert.ok(c && forms, `case ${id} ran`);
      return { c, forms };
    };

    for (const id of Object.keys(causes)) {
      it(`${id}: the kubelet's real message, classified`, TIMEOUT, () => {
        const { c, forms } = one(id);
        const first = caseContainerStatus(forms.get(c.reasons[0]!)!, c)!.state!.waiting!;
        assert.match(first.message ?? '', causes[id]!);
        if (c.reasons.includes('ImagePullBackOff')) {
          // The back-off form wraps the last pull error: Back-off pulling image "X": <first reason>: <cause>.
          const back = caseContainerStatus(forms.get('ImagePullBackOff')!, c)!.state!.waiting!;
          const prefix = `Back-off pulling image "${c.image}": ${c.reasons[0]}: `;
          assert.ok(back.message?.startsWith(prefix), `back-off message: ${back.message}`);
          assert.match(back.message!.slice(prefix.length), causes[id]!);
        }
        const lines = dryRun.lines.filter((l) => l.pod === id);
        assert.equal(lines.length, 1, `one audit line for ${id}: ${JSON.stringify(dryRun.lines.map((l) => l.pod))}`);
        const line = lines[0]!;
        assert.equal(line.container, c.container);
        assert.equal(line.containerKind, c.containerKind);
        assert.equal(line.class, c.expectedClass, `${id}: ${line.waitingMessage}`);
        assert.equal(line.job, null);
        assert.ok(!['failed', 'would-fail'].includes(line.outcome), 'a pod with no Job is reported, never acted on');
      });
    }

    it("the watch's protobuf reads these pods as the API server's JSON has them", TIMEOUT, async () => {
      const stuck = await assertProtobufReadsAsJson(env.kc, ns);
      assert.ok(stuck >= Object.keys(causes).length / 2, `${stuck} stuck containers read in protobuf`);
    });

    it('a pod whose image appears after a few failed pulls recovers and is never touched', TIMEOUT, async () => {
      const core = env.kc.makeApiClient(CoreV1Api);
      const image = `${node.registry}/team/late:1`;
      await core.createNamespacedPod({
        namespace: ns,
        body: { metadata: { name: 'late' }, spec: nodePodSpec(node, [{ name: 'main', image }]) },
      });
      const c = { container: 'main', containerKind: 'regular' as const, reasons: ['ErrImagePull', 'ImagePullBackOff'] };
      await observeReasons(env.kc, ns, 'late', c);
      // While it fails, a sweep with the default grace leaves it alone.
      const during = await runSweep(env.kc, { namespaces: [ns], policy: policyFile('{}') });
      const lateLines = during.lines.filter((l) => l.pod === 'late');
      assert.equal(lateLines.length, 1);
      assert.notEqual(lateLines[0]!.outcome, 'failed');
      await node.pushImage('team/late:1');
      const running = await waitFor(
        async () => {
          const p = await core.readNamespacedPod({ namespace: ns, name: 'late' });
          return p.status?.phase === 'Running' ? p : undefined;
        },
        120_000,
        'pod late Running after the push',
        500,
      );
      assert.ok(running.status?.containerStatuses?.[0]?.state?.running);
      // Nothing stuck any more: even a zero grace finds nothing to do with it.
      const after = await runSweep(env.kc, {
        namespaces: [ns],
        policy: policyFile('defaults: { grace: { permanent: 0s, auth: 0s, transient: 0s, unknown: 0s } }\n'),
        dryRun: true,
      });
      assert.deepEqual(
        after.lines.filter((l) => l.pod === 'late'),
        [],
      );
      const now = await core.readNamespacedPod({ namespace: ns, name: 'late' });
      assert.equal(now.metadata?.annotations?.['imagepull-sweeper/failed-at'], undefined);
      assert.equal(now.metadata?.deletionTimestamp, undefined);
    });
  });
