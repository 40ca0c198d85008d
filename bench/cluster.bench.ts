// Prints figures; asserts nothing. `npm run bench:cluster [JOBS] [--guard]`.
// A dry run and a real sweep of JOBS stuck Jobs (spread over 10 namespaces) on the bundled
// control plane, with the default limits lifted so every Job is failed in one sweep.
// --guard: instead, real sweeps as the shipped ServiceAccount with and without the admission
// guard (manifests/guard.yaml), 3 rounds each, alternating, fresh stuck Jobs every sweep (half
// of them with a podFailurePolicy, so both mechanisms' writes pass the guard).
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { PassThrough } from 'node:stream';
import {
  AdmissionregistrationV1Api,
  ApiException,
  BatchV1Api,
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import { exitStatusOf } from '../src/cli/exit.ts';
import { mapBounded } from '../src/concurrency.ts';
import { createGateway } from '../src/kube/gateway.ts';
import { withRetries } from '../src/kube/retrying.ts';
import { createLogger } from '../src/report/logger.ts';
import { sweep } from '../src/sweep.ts';
import { startCluster } from '../test/support/cluster.ts';
import { createNamespace, jobManifest } from '../test/support/fixtures.ts';
import { setImagePullStuck, waitFor, waitForJobPods } from '../test/support/kubelet.ts';
import { allObjects, applyManifests, serviceAccountKubeconfig } from '../test/support/manifests.ts';
import { NOT_FOUND_MESSAGE, MISSING_IMAGE, policyFile } from '../test/support/sweeper.ts';

const args = process.argv.slice(2);
const guard = args.includes('--guard');
const jobs = Number(args.find((a) => !a.startsWith('--')) ?? 200);

/** JOBS stuck Jobs in 10 fresh namespaces (every other one with a podFailurePolicy FailJob rule when `pfp`). */
async function stuckJobs(kc: KubeConfig, prefix: string, pfp = false): Promise<string[]> {
  const core = kc.makeApiClient(CoreV1Api);
  const batch = kc.makeApiClient(BatchV1Api);
  const namespaces = await Promise.all(Array.from({ length: 10 }, (_, i) => createNamespace(kc, `${prefix}-${i}`)));
  const setupStarted = Date.now();
  await mapBounded(
    Array.from({ length: jobs }, (_, i) => i),
    8,
    async (i) => {
      const namespace = namespaces[i % namespaces.length]!.name;
      const name = `job-${i}`;
      const spec = pfp && i % 2 ? PFP_SPEC : {};
      await batch.createNamespacedJob({ namespace, body: jobManifest(name, MISSING_IMAGE, spec) });
      const [pod] = await waitForJobPods(core, namespace, name, { timeoutMs: 120_000 });
      await setImagePullStuck(core, namespace, pod!.metadata!.name!, {
        since: new Date(Date.now() - 3600_000),
        stuck: [{ container: 'main', reason: 'ImagePullBackOff', message: NOT_FOUND_MESSAGE }],
      });
    },
  );
  console.log(`setup: ${jobs} stuck Jobs in ${namespaces.length} namespaces in ${Date.now() - setupStarted} ms`);
  return namespaces.map((n) => n.name);
}

/** CPU time (user + system, ms) the process has used so far, from /proc (Linux). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // utime, stime in clock ticks (USER_HZ 100)
}

/** The API server's ValidatingAdmissionPolicy plugin so far: seconds spent and requests seen. */
async function vapAdmission(kc: KubeConfig): Promise<{ seconds: number; requests: number }> {
  const cluster = kc.getCurrentCluster()!;
  const ca = Buffer.from(cluster.caData!, 'base64');
  const text = await new Promise<string>((resolve, reject) => {
    https
      .get(`${cluster.server}/metrics`, { ca, headers: { Authorization: `Bearer ${kc.getCurrentUser()!.token}` } }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (d: string) => (body += d));
        res.on('end', () => resolve(body));
      })
      .on('error', reject);
  });
  let seconds = 0;
  let requests = 0;
  for (const line of text.split('\n')) {
    if (
      !line.startsWith('apiserver_admission_controller_admission_duration_seconds_') ||
      !line.includes('name="ValidatingAdmissionPolicy"')
    )
      continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (line.includes('_seconds_sum{')) seconds += value;
    else if (line.includes('_seconds_count{')) requests += value;
  }
  return { seconds, requests };
}

async function timedSweep(
  kc: KubeConfig,
  dryRun: boolean,
  namespaces: string[],
): Promise<{ ms: number; apiserverCpuMs: number; vapUs: number; line: string }> {
  const apiserver = cluster.state.pids['kube-apiserver'];
  const vapBefore = await vapAdmission(cluster.kubeConfig);
  const cpuBefore = cpuMs(apiserver);
  const policy = policyFile(`limits: { maxJobsPerSweep: ${jobs}, maxJobsPerNamespace: ${jobs} }\n`);
  const started = Date.now();
  const result = await sweep(
    {
      gateway: withRetries(createGateway(kc)),
      monotonicMs: () => performance.now(),
      logger: createLogger({ format: 'json', stream: new PassThrough().resume() }),
    },
    { dryRun, namespaces, policy, instance: 'bench' },
  );
  const ms = Date.now() - started;
  const apiserverCpuMs = cpuMs(apiserver) - cpuBefore;
  const vapAfter = await vapAdmission(cluster.kubeConfig);
  const vapRequests = vapAfter.requests - vapBefore.requests;
  // Mean time in the ValidatingAdmissionPolicy plugin per write reaching admission (anyone's).
  const vapUs = Math.round(((vapAfter.seconds - vapBefore.seconds) / Math.max(1, vapRequests)) * 1e6);
  const s = result.summary!;
  const line =
    `${s.podsScanned} pending pods, ${s.outcomes[dryRun ? 'would-fail' : 'failed'] ?? 0} ${dryRun ? 'would fail' : 'failed'}, ` +
    `${s.actionErrors} errors, exit ${exitStatusOf(result.status)}, ${ms} ms (kube-apiserver CPU ${apiserverCpuMs} ms; ${vapRequests} writes through admission, ${vapUs} µs each in the policy plugin)`;
  return { ms, apiserverCpuMs, vapUs, line };
}

/** Applies or removes the guard, and waits until the API server enforces (or stops enforcing) it. */
async function setGuard(admin: KubeConfig, sa: KubeConfig, on: boolean, probeNs: string): Promise<void> {
  const api = admin.makeApiClient(AdmissionregistrationV1Api);
  if (on) await applyManifests(admin);
  else {
    await api.deleteValidatingAdmissionPolicyBinding({ name: 'imagepull-sweeper-guard' }).catch(() => undefined);
    await api.deleteValidatingAdmissionPolicy({ name: 'imagepull-sweeper-guard' }).catch(() => undefined);
  }
  // Probe: a condition on a pod that is not a Job's is refused only while the guard is enforced.
  const saCore = sa.makeApiClient(CoreV1Api);
  await waitFor(
    async () => {
      try {
        await saCore.patchNamespacedPodStatus(
          { namespace: probeNs, name: 'probe', body: { status: { conditions: [{ type: 'Probe', status: 'True' }] } } },
          setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
        );
        return !on;
      } catch (error) {
        return on && error instanceof ApiException && error.code === 403;
      }
    },
    30_000,
    `the guard ${on ? 'enforced' : 'gone'}`,
  );
}

const PFP_SPEC = {
  podFailurePolicy: { rules: [{ action: 'FailJob' as const, onPodConditions: [{ type: 'ImagePullStuck', status: 'True' }] }] },
};

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const cluster = await startCluster();
try {
  const kc = cluster.kubeConfig;
  const batch = kc.makeApiClient(BatchV1Api);
  if (guard) {
    await applyManifests(kc);
    const sa = await serviceAccountKubeconfig(kc);
    const probeNs = (await createNamespace(kc, 'bench-probe')).name;
    await kc.makeApiClient(CoreV1Api).createNamespacedPod({
      namespace: probeNs,
      body: { metadata: { name: 'probe' }, spec: { containers: [{ name: 'main', image: MISSING_IMAGE }] } },
    });
    const objects = allObjects().filter(({ obj }) => obj.kind?.startsWith('ValidatingAdmissionPolicy')).length;
    console.log(`guard: ${objects} objects from manifests/guard.yaml; sweeps run as the ServiceAccount`);
    const times: Record<'without' | 'with', number[]> = { without: [], with: [] };
    const cpu: Record<'without' | 'with', number[]> = { without: [], with: [] };
    const vap: Record<'without' | 'with', number[]> = { without: [], with: [] };
    for (let round = 1; round <= 3; round += 1) {
      for (const mode of ['without', 'with'] as const) {
        const namespaces = await stuckJobs(kc, `bench-${mode}-${round}`, true);
        await setGuard(kc, sa.kc, mode === 'with', probeNs);
        const { ms, apiserverCpuMs, vapUs, line } = await timedSweep(sa.kc, false, namespaces);
        vap[mode].push(vapUs);
        times[mode].push(ms);
        cpu[mode].push(apiserverCpuMs);
        console.log(`round ${round}, ${mode} guard: ${line}`);
      }
    }
    sa.remove();
    const change = (a: number, b: number): string => `${b >= a ? '+' : ''}${(((b - a) / a) * 100).toFixed(1)}%`;
    const [without, withGuard] = [median(times.without), median(times.with)];
    const [cpuWithout, cpuWith] = [median(cpu.without), median(cpu.with)];
    console.log(`median of 3, sweep: without guard ${without} ms, with guard ${withGuard} ms (${change(without, withGuard)})`);
    console.log(`median of 3, policy plugin per write: without ${median(vap.without)} µs, with ${median(vap.with)} µs`);
    console.log(
      `median of 3, kube-apiserver CPU during the sweep: without ${cpuWithout} ms, with ${cpuWith} ms (${change(cpuWithout, cpuWith)})`,
    );
  } else {
    const namespaces = await stuckJobs(kc, 'bench');
    for (const dryRun of [true, false]) {
      const { line } = await timedSweep(kc, dryRun, namespaces);
      console.log(`${dryRun ? 'dry run' : 'sweep  '}: ${line}`);
    }
    const started = Date.now();
    await waitFor(
      async () => {
        const all = await batch.listJobForAllNamespaces({ labelSelector: '' });
        const failed = all.items.filter((j) => j.status?.conditions?.some((c) => c.type === 'Failed' && c.status === 'True')).length;
        return failed >= jobs ? failed : undefined;
      },
      300_000,
      'every Job to be Failed',
      1000,
    );
    console.log(`job controller: all ${jobs} Jobs Failed/DeadlineExceeded ${Date.now() - started} ms after the sweep`);
  }
} finally {
  await cluster.stop();
}
