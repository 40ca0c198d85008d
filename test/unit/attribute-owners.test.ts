// Attribution follows controller references only, and the owner chain above a Job (CronJob,
// JobSet, what controls the JobSet) reaches the audit line, the Event and the message.
// The JobSet's answer is scripted here; that the API server serves it is proven in test/e2e.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Job, V1OwnerReference, V1Pod } from '@kubernetes/client-node';
import { attributeToJobs } from '../../src/attribute/attribute.ts';
import { toJobView } from '../../src/attribute/job-view.ts';
import { formatOwners } from '../../src/model.ts';
import { findStuckContainers } from '../../src/classify/index.ts';
import { formatClaimMessage } from '../../src/judge/claim-message.ts';
import { judge } from '../../src/judge/judge.ts';
import type { KubeGateway } from '../../src/kube/gateway.ts';
import { FALLBACK_POLICY as DEFAULT_POLICY } from '../../src/policy/defaults.ts';
import { auditLine } from '../../src/report/audit.ts';
import { recordedPod } from './real-node.ts';

const ref = (kind: string, name: string, apiVersion: string, controller?: boolean): V1OwnerReference => ({
  apiVersion,
  kind,
  name,
  uid: `uid-${kind}-${name}`,
  ...(controller === undefined ? {} : { controller }),
});
// The 1.36+ workload API's PodGroup (scheduling.k8s.io) is a plain owner, never a controller.
const POD_GROUP = ref('PodGroup', 'gang-1', 'scheduling.k8s.io/v1alpha1', false);
const JOB = ref('Job', 'train-0', 'batch/v1', true);

/** A pod the real kubelet left waiting on a missing repository (containerd 1.6), with the given owners. */
function stuckPod(owners: V1OwnerReference[]): V1Pod {
  const pod = recordedPod('repo-missing', 'ImagePullBackOff');
  pod.metadata = { ...pod.metadata, namespace: 'ml', ownerReferences: owners };
  return pod;
}

function v1job(name: string, owners: V1OwnerReference[]): V1Job {
  return {
    metadata: { namespace: 'ml', name, uid: `uid-Job-${name}`, resourceVersion: '3', ownerReferences: owners },
    spec: { template: { spec: { containers: [{ name: 'main' }] } } },
    status: { startTime: new Date('2026-11-30T19:35:00Z') },
  };
}

function gatewayWith(jobs: V1Job[], jobSets: Record<string, V1OwnerReference[]>, reads: string[] = []): KubeGateway {
  return {
    readJob: async (namespace: string, name: string) => {
      const j = jobs.find((x) => x.metadata?.name === name && x.metadata.namespace === namespace);
      if (!j) throw Object.assign(new Error('not found'), { statusCode: 404 });
      return structuredClone(j);
    },
    readJobSet: async (namespace: string, name: string) => {
      reads.push(`${namespace}/${name}`);
      const owners = jobSets[name];
      if (!owners) throw Object.assign(new Error('not found'), { statusCode: 404 });
      return { metadata: { namespace, name, uid: `uid-JobSet-${name}`, ownerReferences: owners } };
    },
  } as unknown as KubeGateway;
}

const OPTIONS = { concurrency: 4, listConcurrency: 2, listThreshold: 10 };

describe('attribution follows the controller reference only', () => {
  for (const order of ['PodGroup first', 'Job first']) {
    it(`a Job pod that also carries a PodGroup owner reference is the Job's (${order})`, async () => {
      const owners = order === 'PodGroup first' ? [POD_GROUP, JOB] : [JOB, POD_GROUP];
      const stuck = findStuckContainers(stuckPod(owners));
      assert.equal(stuck.length, 1);
      assert.deepEqual(stuck[0]!.controller, { ...JOB, controller: true });
      const attribution = await attributeToJobs(gatewayWith([v1job('train-0', [])], {}), stuck, OPTIONS);
      const owner = attribution.ownerOf(stuck[0]!.podUid);
      assert.equal(owner.kind, 'job');
      assert.equal(owner.kind === 'job' && owner.job.name, 'train-0');
    });
  }

  it('a pod whose only Job reference is not a controller is not a Job pod (the PodGroup or nothing controls it)', async () => {
    const stuck = findStuckContainers(stuckPod([POD_GROUP, { ...JOB, controller: false }]));
    assert.equal(stuck[0]!.controller, undefined);
    const attribution = await attributeToJobs(gatewayWith([v1job('train-0', [])], {}), stuck, OPTIONS);
    assert.deepEqual(attribution.ownerOf(stuck[0]!.podUid), { kind: 'not-a-job', owner: undefined });
  });

  it("a Job's owner chain skips a non-controller reference too", () => {
    const view = toJobView(v1job('nightly-1', [POD_GROUP, ref('CronJob', 'nightly', 'batch/v1', true)]));
    assert.deepEqual(formatOwners(view.owners), ['CronJob/nightly']);
    assert.equal(view.cronJob, 'nightly');
    assert.deepEqual(toJobView(v1job('bare', [POD_GROUP])).owners, []);
  });
});

describe('the owner chain above a Job', () => {
  const jobSetRef = ref('JobSet', 'llm', 'jobset.x-k8s.io/v1alpha2', true);
  const trainJob = ref('TrainJob', 'llm-7', 'trainer.kubeflow.org/v1alpha1', true);

  it('a JobSet Job names its JobSet and what controls the JobSet, read once for all its stuck Jobs', async () => {
    const reads: string[] = [];
    const jobs = [v1job('llm-worker-0', [jobSetRef]), v1job('llm-worker-1', [jobSetRef])];
    const stuck = jobs.flatMap((j, i) => {
      const pod = stuckPod([ref('Job', j.metadata!.name!, 'batch/v1', true)]);
      pod.metadata = { ...pod.metadata, name: `p${i}`, uid: `pod-${i}` };
      return findStuckContainers(pod);
    });
    const attribution = await attributeToJobs(gatewayWith(jobs, { llm: [POD_GROUP, trainJob] }, reads), stuck, OPTIONS);
    assert.deepEqual(reads, ['ml/llm']);
    for (const c of stuck) {
      const owner = attribution.ownerOf(c.podUid);
      assert.ok(owner.kind === 'job');
      assert.deepEqual(formatOwners(owner.job.owners), ['JobSet/llm', 'TrainJob/llm-7']);
    }
    const { decisions } = judge({
      stuck,
      ownerOf: attribution.ownerOf,
      namespaceLabels: new Map(),
      policy: DEFAULT_POLICY,
      now: new Date('2026-12-01T00:00:00Z'),
    });
    const d = decisions[0]!;
    assert.deepEqual(d.owners, ['JobSet/llm', 'TrainJob/llm-7']);
    assert.match(formatClaimMessage(d), /; owners JobSet\/llm, TrainJob\/llm-7\): the image or tag does not exist .* ImagePullBackOff: /);
    const line = auditLine('s', { decision: d, outcome: 'failed', error: undefined }, false);
    assert.deepEqual(line.owners, ['JobSet/llm', 'TrainJob/llm-7']);
    assert.equal(line.volume, null);
  });

  it('a JobSet that cannot be read, or was replaced, ends the chain at the JobSet', async () => {
    const gone = await attributeToJobs(
      gatewayWith([v1job('w', [jobSetRef])], {}),
      findStuckContainers(stuckPod([ref('Job', 'w', 'batch/v1', true)])),
      OPTIONS,
    );
    const owner = gone.ownerOf('uid-repo-missing');
    assert.ok(owner.kind === 'job');
    assert.deepEqual(formatOwners(owner.job.owners), ['JobSet/llm']);
    assert.deepEqual(gone.errors, []);

    const replaced = gatewayWith([v1job('w', [{ ...jobSetRef, uid: 'an-older-jobset' }])], { llm: [trainJob] });
    const again = await attributeToJobs(replaced, findStuckContainers(stuckPod([ref('Job', 'w', 'batch/v1', true)])), OPTIONS);
    const o = again.ownerOf('uid-repo-missing');
    assert.ok(o.kind === 'job');
    assert.deepEqual(formatOwners(o.job.owners), ['JobSet/llm']);
  });

  it('a CronJob Job names its CronJob; a pod without a Job names its own controller', () => {
    const cron = toJobView(v1job('nightly-1', [ref('CronJob', 'nightly', 'batch/v1', true)]));
    assert.deepEqual(formatOwners(cron.owners), ['CronJob/nightly']);
    const spark = ref('SparkApplication', 'etl', 'sparkoperator.k8s.io/v1beta2', true);
    const stuck = findStuckContainers(stuckPod([spark]));
    const { decisions } = judge({
      stuck,
      ownerOf: () => ({ kind: 'not-a-job', owner: stuck[0]!.controller }),
      namespaceLabels: new Map(),
      policy: DEFAULT_POLICY,
      now: new Date('2026-12-01T00:00:00Z'),
    });
    assert.deepEqual(decisions[0]!.owners, ['SparkApplication/etl']);
  });
});
