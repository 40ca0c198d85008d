// Runs the real sweep in-process against the test cluster and collects its audit lines, plus
// builders for the scenarios the sweep e2e tests share.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import {
  BatchV1Api,
  CoreV1Api,
  EventsV1Api,
  type EventsV1Event,
  type KubeConfig,
  type V1CronJob,
  type V1Job,
} from '@kubernetes/client-node';
import { exitStatusOf } from '../../src/cli/exit.ts';
import { createGateway, type KubeGateway } from '../../src/kube/gateway.ts';
import { withRetries } from '../../src/kube/retrying.ts';
import type { PolicyLocation } from '../../src/policy/load.ts';
import type { AuditLine, SweepSummary } from '../../src/report/audit.ts';
import { createLogger } from '../../src/report/logger.ts';
import { sweep, type DryRunMode } from '../../src/sweep.ts';
import { jobManifest } from './fixtures.ts';
import { realPullMessage, setImagePullStuck, waitFor, waitForJobPods } from './kubelet.ts';

export const MISSING_IMAGE = 'registry.invalid/team/app:does-not-exist';
/** What the real kubelet writes for a missing tag (recorded on the test node), for MISSING_IMAGE. */
export const NOT_FOUND_MESSAGE = realPullMessage('tag-missing', MISSING_IMAGE);

export interface SweepRun {
  exitCode: number;
  lines: AuditLine[];
  summary: SweepSummary | undefined;
  /** Every log record, audit or not. */
  records: Record<string, unknown>[];
}

const policyDir = mkdtempSync(join(tmpdir(), 'ips-policy-'));
// Each test file runs in a process of its own: its policy files go with it.
process.on('exit', () => rmSync(policyDir, { recursive: true, force: true }));
let policyFiles = 0;

export function policyFile(yaml: string): PolicyLocation {
  const path = join(policyDir, `policy-${++policyFiles}.yaml`);
  writeFileSync(path, yaml);
  return { kind: 'file', path };
}

export async function runSweep(
  kc: KubeConfig,
  options: {
    namespaces: string[];
    policy: PolicyLocation;
    dryRun?: boolean;
    dryRunMode?: DryRunMode;
    pageSize?: number;
    kueueConfig?: { namespace: string; name: string };
    /** Stuck Jobs a part of the sweep judges (default 500). */
    chunkSize?: number;
  },
  /** Instead of the plain gateway (e.g. one that injects faults); retries are added around it. */
  plainGateway?: KubeGateway,
): Promise<SweepRun> {
  const stream = new PassThrough();
  const chunks: string[] = [];
  stream.on('data', (c: Buffer) => chunks.push(c.toString()));
  const logger = createLogger({ format: 'json', stream });
  const result = await sweep(
    {
      gateway: withRetries(plainGateway ?? createGateway(kc), plainGateway ? { sleep: async () => undefined } : {}),
      monotonicMs: () => performance.now(),
      logger,
    },
    {
      dryRun: options.dryRun ?? false,
      ...(options.dryRunMode ? { dryRunMode: options.dryRunMode } : {}),
      namespaces: options.namespaces,
      policy: options.policy,
      ...(options.kueueConfig ? { kueueConfig: options.kueueConfig } : {}),
      instance: 'e2e',
      pageSize: options.pageSize,
      ...(options.chunkSize ? { chunkSize: options.chunkSize } : {}),
    },
  );
  await new Promise((r) => setImmediate(r));
  const records = chunks
    .join('')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  return {
    exitCode: exitStatusOf(result.status),
    lines: records.filter((r) => r.message === 'decision') as unknown as AuditLine[],
    summary: records.find((r) => r.message === 'summary') as unknown as SweepSummary | undefined,
    records,
  };
}

export interface StuckJobOptions {
  /** Seconds since the container could first pull. */
  stuckFor: number;
  reason?: string;
  message?: string;
  image?: string;
  annotations?: Record<string, string>;
  init?: boolean;
  spec?: Partial<NonNullable<V1Job['spec']>>;
  ownerReferences?: NonNullable<V1Job['metadata']>['ownerReferences'];
  /** Create the pod here (as another Job controller would) instead of waiting for the built-in one. */
  podByOtherController?: boolean;
}

/** Creates a Job, waits for the Job controller's pod, and plays the kubelet: the pod cannot pull. */
export async function createStuckJob(
  kc: KubeConfig,
  namespace: string,
  name: string,
  o: StuckJobOptions,
): Promise<{ job: V1Job; pod: string }> {
  const batch = kc.makeApiClient(BatchV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  const image = o.image ?? MISSING_IMAGE;
  const manifest = jobManifest(name, o.init ? 'busybox:1.36' : image, o.spec);
  manifest.metadata = { ...manifest.metadata, annotations: o.annotations, ownerReferences: o.ownerReferences };
  if (o.init) manifest.spec!.template.spec!.initContainers = [{ name: 'fetch', image, command: ['true'] }];
  const job = await batch.createNamespacedJob({ namespace, body: manifest });
  let podName: string;
  if (o.podByOtherController) {
    podName = `${name}-pod`;
    await core.createNamespacedPod({
      namespace,
      body: {
        metadata: {
          name: podName,
          ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name, uid: job.metadata!.uid!, controller: true }],
        },
        spec: { ...manifest.spec!.template.spec!, restartPolicy: 'Never' },
      },
    });
  } else {
    const [pod] = await waitForJobPods(core, namespace, name);
    podName = pod!.metadata!.name!;
  }
  await setImagePullStuck(core, namespace, podName, {
    since: new Date(Date.now() - o.stuckFor * 1000),
    stuck: [
      {
        container: o.init ? 'fetch' : 'main',
        init: o.init,
        reason: o.reason ?? 'ImagePullBackOff',
        message: o.message ?? NOT_FOUND_MESSAGE.replaceAll(MISSING_IMAGE, image),
      },
    ],
  });
  return { job, pod: podName };
}

export async function readJob(kc: KubeConfig, namespace: string, name: string): Promise<V1Job> {
  return kc.makeApiClient(BatchV1Api).readNamespacedJob({ namespace, name });
}

export function trueCondition(job: V1Job, type: string): { reason?: string; message?: string } | undefined {
  return job.status?.conditions?.find((c) => c.type === type && c.status === 'True');
}

/** The Job ended as the sweeper fails it: `Failed` with reason ImagePullStuck and the sweeper's message (docs/contract.md). */
export function assertFailedBySweeper(job: V1Job): void {
  const failed = trueCondition(job, 'Failed');
  assert.equal(failed?.reason, 'ImagePullStuck', `Job ${job.metadata?.name}: ${JSON.stringify(failed)}`);
  assert.match(
    failed?.message ?? '',
    /^imagepull-sweeper: (?:init|sidecar|regular) container \S+ of pod \S+ /,
    `Job ${job.metadata?.name}`,
  );
}

/** Waits until the real Job controller has marked the Job Failed; returns it. */
export async function waitForJobFailed(kc: KubeConfig, namespace: string, name: string, timeoutMs = 90_000): Promise<V1Job> {
  return waitFor(
    async () => {
      const job = await readJob(kc, namespace, name);
      return trueCondition(job, 'Failed') ? job : undefined;
    },
    timeoutMs,
    `Job ${namespace}/${name} Failed`,
    300,
  );
}

/** The sweeper's events.k8s.io/v1 Events in a namespace. */
export async function sweeperEvents(kc: KubeConfig, namespace: string): Promise<EventsV1Event[]> {
  const list = await kc.makeApiClient(EventsV1Api).listNamespacedEvent({ namespace });
  return list.items.filter((e) => e.reportingController === 'imagepull-sweeper');
}

/** resourceVersion of every Job and Pod in the namespace, to prove nothing was written. */
export async function snapshot(kc: KubeConfig, namespace: string): Promise<Record<string, string>> {
  const jobs = await kc.makeApiClient(BatchV1Api).listNamespacedJob({ namespace });
  const pods = await kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace });
  const out: Record<string, string> = {};
  for (const j of jobs.items) out[`job/${j.metadata!.name}`] = j.metadata!.resourceVersion!;
  for (const p of pods.items) out[`pod/${p.metadata!.name}`] = p.metadata!.resourceVersion!;
  return out;
}

/** A snapshot taken once controllers have stopped writing (two equal reads a second apart). */
export async function settledSnapshot(kc: KubeConfig, namespace: string): Promise<Record<string, string>> {
  let previous = await snapshot(kc, namespace);
  for (let i = 0; i < 30; i += 1) {
    await new Promise((r) => setTimeout(r, 1000));
    const current = await snapshot(kc, namespace);
    if (JSON.stringify(current) === JSON.stringify(previous)) return current;
    previous = current;
  }
  throw new Error(`namespace ${namespace} never settled`);
}

/** A CronJob whose Jobs run `image`; `schedule` defaults to every minute. */
export async function createCronJob(
  kc: KubeConfig,
  namespace: string,
  name: string,
  o: { image?: string; schedule?: string; annotations?: Record<string, string>; failedJobsHistoryLimit?: number } = {},
): Promise<V1CronJob> {
  return kc.makeApiClient(BatchV1Api).createNamespacedCronJob({
    namespace,
    body: {
      metadata: { name, annotations: o.annotations },
      spec: {
        schedule: o.schedule ?? '* * * * *',
        failedJobsHistoryLimit: o.failedJobsHistoryLimit ?? 1,
        jobTemplate: { spec: jobManifest(name, o.image ?? MISSING_IMAGE).spec! },
      },
    },
  });
}

/** The ownerReferences of a Job the CronJob's controller would have made. */
export function ownedBy(cronJob: V1CronJob): NonNullable<V1Job['metadata']>['ownerReferences'] {
  const m = cronJob.metadata!;
  return [{ apiVersion: 'batch/v1', kind: 'CronJob', name: m.name!, uid: m.uid!, controller: true, blockOwnerDeletion: true }];
}

export async function readCronJob(kc: KubeConfig, namespace: string, name: string): Promise<V1CronJob> {
  return kc.makeApiClient(BatchV1Api).readNamespacedCronJob({ namespace, name });
}
