import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { capacityByJob, describeCapacity, formatAmount, formatRequests, sumCapacity } from '../../src/judge/capacity.ts';
import { parseQuantity, podCapacity, podHeldSince, podRequests, type PodCapacity } from '../../src/observe/pod-requests.ts';

const c = (name: string, requests: Record<string, string>, extra: Partial<V1Container> = {}): V1Container => ({
  name,
  resources: { requests },
  ...extra,
});
const pod = (
  spec: Partial<NonNullable<V1Pod['spec']>>,
  meta: Partial<NonNullable<V1Pod['metadata']>> = {},
  status: V1Pod['status'] = {},
): V1Pod => ({
  metadata: { name: 'p', namespace: 'ns', uid: 'u', ...meta },
  spec: { containers: [], ...spec },
  status,
});

describe('parseQuantity', () => {
  const cases: [string, number][] = [
    ['1', 1],
    ['500m', 0.5],
    ['0.5', 0.5],
    ['.25', 0.25],
    ['100n', 1e-7],
    ['10u', 1e-5],
    ['2k', 2000],
    ['1M', 1e6],
    ['1.5G', 1.5e9],
    ['1T', 1e12],
    ['1Ki', 1024],
    ['128Mi', 128 * 2 ** 20],
    ['1Gi', 2 ** 30],
    ['1.5Gi', 1.5 * 2 ** 30],
    ['2Ti', 2 * 2 ** 40],
    ['1e3', 1000],
    ['12E-1', 1.2],
    ['4', 4],
    ['+3', 3],
  ];
  for (const [text, value] of cases) {
    it(`${text} = ${value}`, () => assert.ok(Math.abs(parseQuantity(text)! - value) < 1e-12 * Math.max(1, value)));
  }
  it('rejects what is not a quantity', () => {
    for (const bad of ['', 'abc', '1 Gi', '1gi', '1KiB', 'Gi', '1.2.3']) assert.equal(parseQuantity(bad), undefined, bad);
    assert.equal(parseQuantity(undefined), undefined);
  });
  it('takes numbers as they are', () => {
    assert.equal(parseQuantity(3), 3);
    assert.equal(parseQuantity(Number.NaN), undefined);
  });
});

describe('podRequests', () => {
  it('sums the regular containers', () => {
    const p = pod({ containers: [c('a', { cpu: '500m', memory: '1Gi' }), c('b', { cpu: '1', memory: '512Mi', 'nvidia.com/gpu': '2' })] });
    assert.deepEqual(podRequests(p), { cpu: 1.5, memory: 1.5 * 2 ** 30, 'nvidia.com/gpu': 2 });
  });
  it('a resource with a limit and no request counts at its limit', () => {
    const p = pod({ containers: [{ name: 'a', resources: { limits: { 'example.com/widget': '3', cpu: '2' }, requests: { cpu: '1' } } }] });
    assert.deepEqual(podRequests(p), { 'example.com/widget': 3, cpu: 1 });
  });
  it('a pod without requests requests nothing', () => {
    assert.deepEqual(podRequests(pod({ containers: [{ name: 'a' }] })), {});
    assert.deepEqual(podRequests({}), {});
  });
  it('an init container larger than the regular ones sets the request', () => {
    const p = pod({ initContainers: [c('init', { cpu: '4', memory: '1Gi' })], containers: [c('a', { cpu: '1', memory: '2Gi' })] });
    assert.deepEqual(podRequests(p), { cpu: 4, memory: 2 * 2 ** 30 });
  });
  it('init containers run one at a time: the largest counts, not their sum', () => {
    const p = pod({ initContainers: [c('i1', { cpu: '2' }), c('i2', { cpu: '3' })], containers: [c('a', { cpu: '1' })] });
    assert.deepEqual(podRequests(p), { cpu: 3 });
  });
  it('a sidecar (restartable init container) adds to the regular containers', () => {
    const p = pod({ initContainers: [c('side', { cpu: '250m' }, { restartPolicy: 'Always' })], containers: [c('a', { cpu: '1' })] });
    assert.deepEqual(podRequests(p), { cpu: 1.25 });
  });
  it('an init container after a sidecar runs beside it', () => {
    const p = pod({
      initContainers: [c('side', { cpu: '1' }, { restartPolicy: 'Always' }), c('migrate', { cpu: '3' })],
      containers: [c('a', { cpu: '1' })],
    });
    // during init: 1 + 3 = 4; running: 1 + 1 = 2
    assert.deepEqual(podRequests(p), { cpu: 4 });
  });
  it('an init container before a sidecar does not run beside it', () => {
    const p = pod({
      initContainers: [c('migrate', { cpu: '3' }), c('side', { cpu: '1' }, { restartPolicy: 'Always' })],
      containers: [c('a', { cpu: '1' })],
    });
    assert.deepEqual(podRequests(p), { cpu: 3 });
  });
  it('adds the pod overhead', () => {
    const p = pod({ containers: [c('a', { cpu: '1', memory: '1Gi' })], overhead: { cpu: '250m', memory: '120Mi' } });
    assert.deepEqual(podRequests(p), { cpu: 1.25, memory: 2 ** 30 + 120 * 2 ** 20 });
  });
  it('pod-level requests replace the containers’ for the resources they name', () => {
    const p = pod({ containers: [c('a', { cpu: '1', memory: '1Gi', 'nvidia.com/gpu': '1' })] });
    (p.spec as unknown as { resources: unknown }).resources = { requests: { cpu: '3' } };
    assert.deepEqual(podRequests(p), { cpu: 3, memory: 2 ** 30, 'nvidia.com/gpu': 1 });
  });
  it('drops resources requested at zero and ignores unparsable quantities', () => {
    const p = pod({ containers: [c('a', { cpu: '0', memory: 'lots', 'example.com/widget': '1' })] });
    assert.deepEqual(podRequests(p), { 'example.com/widget': 1 });
  });
});

describe('podHeldSince', () => {
  it('is when the pod was scheduled', () => {
    const p = pod(
      {},
      { creationTimestamp: new Date('2026-01-01T00:00:00Z') },
      {
        conditions: [{ type: 'PodScheduled', status: 'True', lastTransitionTime: new Date('2026-01-01T01:00:00Z') }],
      },
    );
    assert.deepEqual(podHeldSince(p), new Date('2026-01-01T01:00:00Z'));
  });
  it('falls back on creation without a PodScheduled True condition (raw JSON strings too)', () => {
    const p = pod(
      {},
      { creationTimestamp: '2026-01-01T00:00:00Z' as unknown as Date },
      { conditions: [{ type: 'PodScheduled', status: 'False' }] },
    );
    assert.deepEqual(podHeldSince(p), new Date('2026-01-01T00:00:00Z'));
    assert.equal(podHeldSince(pod({})), undefined);
  });
  it('podCapacity pairs both', () => {
    const p = pod({ containers: [c('a', { cpu: '2' })] }, { creationTimestamp: new Date(0) });
    assert.deepEqual(podCapacity(p), { requests: { cpu: 2 }, heldSince: new Date(0) });
  });
});

describe('capacityByJob', () => {
  const now = new Date('2026-01-01T10:00:00Z');
  const job = (uid: string) => ({ apiVersion: 'batch/v1', kind: 'Job', name: uid, uid, controller: true });
  const pods = new Map<string, PodCapacity>([
    ['p1', { requests: { cpu: 1, 'nvidia.com/gpu': 2 }, heldSince: new Date('2026-01-01T09:00:00Z') }],
    ['p2', { requests: { cpu: 1, 'nvidia.com/gpu': 2 }, heldSince: new Date('2026-01-01T09:30:00Z') }],
    ['p3', { requests: { memory: 1024 }, heldSince: undefined }],
    ['p4', { requests: { cpu: 8 }, heldSince: new Date('2026-01-01T11:00:00Z') }],
  ]);
  it('sums each Job’s stuck pods once, however many containers are stuck', () => {
    const stuck = [
      { podUid: 'p1', controller: job('j1') },
      { podUid: 'p1', controller: job('j1') },
      { podUid: 'p2', controller: job('j1') },
      { podUid: 'p3', controller: job('j2') },
    ];
    const byJob = capacityByJob(stuck, pods, now);
    assert.deepEqual(byJob.get('j1'), {
      pods: 2,
      requests: { cpu: 2, 'nvidia.com/gpu': 4 },
      resourceSeconds: { cpu: 5400, 'nvidia.com/gpu': 10800 },
      heldSeconds: 5400,
    });
    // held since unknown: the requests count, no time
    assert.deepEqual(byJob.get('j2'), { pods: 1, requests: { memory: 1024 }, resourceSeconds: { memory: 0 }, heldSeconds: 0 });
  });
  it('skips pods not owned by a Job and pods not read', () => {
    const stuck = [
      { podUid: 'p1', controller: { ...job('rs'), kind: 'ReplicaSet' } },
      { podUid: 'p2', controller: undefined },
      { podUid: 'gone', controller: job('j3') },
    ];
    assert.equal(capacityByJob(stuck, pods, now).size, 0);
  });
  it('a held-since after now (clock skew) counts as zero, never negative', () => {
    const byJob = capacityByJob([{ podUid: 'p4', controller: job('j4') }], pods, now);
    assert.equal(byJob.get('j4')!.heldSeconds, 0);
    assert.equal(byJob.get('j4')!.resourceSeconds.cpu, 0);
  });
  it('sumCapacity adds Jobs up', () => {
    const a = { pods: 1, requests: { cpu: 1 }, resourceSeconds: { cpu: 60 }, heldSeconds: 60 };
    const b = { pods: 2, requests: { cpu: 2, memory: 10 }, resourceSeconds: { cpu: 10, memory: 5 }, heldSeconds: 5 };
    assert.deepEqual(sumCapacity([a, b]), {
      pods: 3,
      requests: { cpu: 3, memory: 10 },
      resourceSeconds: { cpu: 70, memory: 5 },
      heldSeconds: 65,
    });
    assert.deepEqual(sumCapacity([]), { pods: 0, requests: {}, resourceSeconds: {}, heldSeconds: 0 });
  });
});

describe('formatting', () => {
  it('formats amounts like a manifest', () => {
    assert.equal(formatAmount('cpu', 0.5), '500m');
    assert.equal(formatAmount('cpu', 2), '2');
    assert.equal(formatAmount('cpu', 1.25), '1.25');
    assert.equal(formatAmount('memory', 2 ** 30), '1Gi');
    assert.equal(formatAmount('memory', 1.5 * 2 ** 30), '1.5Gi');
    assert.equal(formatAmount('memory', 128 * 2 ** 20), '128Mi');
    assert.equal(formatAmount('memory', 1000), '1000');
    assert.equal(formatAmount('ephemeral-storage', 2 ** 40), '1Ti');
    assert.equal(formatAmount('hugepages-2Mi', 4 * 2 ** 20), '4Mi');
    assert.equal(formatAmount('nvidia.com/gpu', 4), '4');
  });
  it('lists extended resources first, then cpu and memory', () => {
    assert.equal(
      formatRequests({ memory: 2 ** 30, cpu: 2, 'nvidia.com/gpu': 4, 'example.com/widget': 1, pods: 1 }),
      '1 example.com/widget, 4 nvidia.com/gpu, 2 cpu, 1Gi memory, 1 pods',
    );
    assert.equal(formatRequests({}), '');
  });
  it('describes the capacity with the time held', () => {
    const one = { pods: 1, requests: { cpu: 1, 'nvidia.com/gpu': 4 }, resourceSeconds: {}, heldSeconds: 3 * 3600 + 12 * 60 + 0.7 };
    assert.equal(describeCapacity(one), '4 nvidia.com/gpu, 1 cpu held 3h12m');
    assert.equal(describeCapacity({ ...one, pods: 3 }), '4 nvidia.com/gpu, 1 cpu held 3h12m in total by 3 pods');
    assert.equal(describeCapacity({ ...one, requests: {} }), undefined);
    assert.equal(describeCapacity(undefined), undefined);
  });
});
