import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { attributeToJobs } from '../../src/attribute/attribute.ts';
import { toJobView } from '../../src/attribute/job-view.ts';
import { jobSetMembership } from '../../src/attribute/jobset.ts';
import { formatClaimMessage, parseClaimMessage } from '../../src/judge/claim-message.ts';
import {
  formatSpent,
  keepJobSetMemory,
  laterAttempt,
  readSpent,
  rememberSpent,
  SPENT_KEPT,
  spentByJobSet,
} from '../../src/judge/jobset.ts';
import { judge, rejudgeJob, type JudgeInput } from '../../src/judge/judge.ts';
import type { Decision } from '../../src/judge/types.ts';
import type { JobSetObject, KubeGateway } from '../../src/kube/gateway.ts';
import type { JobSetMembership, JobView, SpentGrace, StuckContainer } from '../../src/model.ts';
import { ANNOTATIONS } from '../../src/policy/annotations.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import { NOW, job, ownersFor, secondsAgo, stuckIn } from './judge-fixtures.ts';

const IMAGE = 'registry.example/app:missing';
const FAILED_AT = '2026-11-29T11:58:00Z';

function earlier(over: Partial<SpentGrace> = {}): SpentGrace {
  return {
    image: IMAGE,
    pullClass: 'permanent',
    job: 'train-worker-0',
    restartAttempt: 0,
    jobRestartAttempt: undefined,
    at: FAILED_AT,
    ...over,
  };
}

function member(over: Partial<JobSetMembership> = {}, spent: SpentGrace[] = [earlier()]): JobSetMembership {
  return { name: 'train', uid: 'uid-train', restartAttempt: 1, jobRestartAttempt: undefined, remembered: formatSpent(spent), ...over };
}

function judgeOne(j: JobView, stuck: StuckContainer[] = [stuckIn(j, { stuckSince: secondsAgo(3) })], yaml = '{}'): Decision {
  const parsed = parsePolicyYaml(yaml);
  assert.ok(parsed.ok);
  const input: JudgeInput = { stuck, ownerOf: ownersFor(stuck, [j]), namespaceLabels: new Map(), policy: parsed.policy, now: NOW };
  const { decisions } = judge(input);
  assert.equal(decisions.length, 1);
  return decisions[0]!;
}

describe('jobset: which JobSet and restart attempt a Job is of', () => {
  const owner = { apiVersion: 'jobset.x-k8s.io/v1alpha2', kind: 'JobSet', name: 'train', uid: 'uid-train', controller: true };
  const labels = { 'jobset.sigs.k8s.io/restart-attempt': '2', 'jobset.sigs.k8s.io/job-restart-attempt': '1' };

  it('reads the controller reference and both restart labels', () => {
    assert.deepEqual(jobSetMembership({ ownerReferences: [owner], labels }), {
      name: 'train',
      uid: 'uid-train',
      restartAttempt: 2,
      jobRestartAttempt: 1,
    });
  });

  it('a JobSet that is not the controller, of another group, or no label: not a member / attempt unknown', () => {
    assert.equal(jobSetMembership({ ownerReferences: [{ ...owner, controller: false }] }), undefined);
    assert.equal(jobSetMembership({ ownerReferences: [{ ...owner, apiVersion: 'example.com/v1' }] }), undefined);
    const noLabels = jobSetMembership({ ownerReferences: [owner], labels: { 'jobset.sigs.k8s.io/restart-attempt': 'x' } });
    assert.equal(noLabels?.restartAttempt, undefined);
    assert.equal(noLabels?.jobRestartAttempt, undefined);
  });

  it('toJobView carries it, and only for Jobs of a JobSet', () => {
    const view = toJobView({ metadata: { name: 'train-w-0', namespace: 'ml', uid: 'u', ownerReferences: [owner], labels } });
    assert.equal(view.jobSet?.name, 'train');
    assert.equal('jobSet' in toJobView({ metadata: { name: 'plain', namespace: 'ml', uid: 'u' } }), false);
  });
});

describe('jobset: the memory on the JobSet', () => {
  it('round-trips, and drops entries that are not ones', () => {
    const entries = [earlier(), earlier({ pullClass: 'auth', restartAttempt: undefined, jobRestartAttempt: 3 })];
    assert.deepEqual(readSpent(formatSpent(entries)), entries);
    const mixed = JSON.stringify([
      { image: IMAGE, class: 'nonsense', job: 'a', at: FAILED_AT },
      7,
      null,
      JSON.parse(formatSpent([earlier()]))[0],
    ]);
    assert.deepEqual(readSpent(mixed), [earlier()]);
    assert.deepEqual(readSpent('not json'), []);
    assert.deepEqual(readSpent('{"image":"x"}'), []);
    assert.deepEqual(readSpent(undefined), []);
  });

  it('remembers a failure once, newest last, at most SPENT_KEPT', () => {
    const d = {
      image: IMAGE,
      pullClass: 'permanent' as const,
      job: 'train-worker-0',
      jobView: job('train-worker-0', { jobSet: member({ restartAttempt: 0 }, []) }),
    };
    const first = rememberSpent(undefined, d, FAILED_AT);
    assert.deepEqual(readSpent(first), [earlier()]);
    assert.equal(rememberSpent(first, d, '2026-11-29T11:59:00Z'), undefined, 'a repeated sweep writes nothing');
    let raw: string | undefined;
    for (let attempt = 0; attempt < SPENT_KEPT + 4; attempt += 1) {
      raw = rememberSpent(raw, { ...d, jobView: job('w', { jobSet: member({ restartAttempt: attempt }, []) }) }, FAILED_AT) ?? raw;
    }
    const kept = readSpent(raw);
    assert.equal(kept.length, SPENT_KEPT);
    assert.equal(kept.at(-1)!.restartAttempt, SPENT_KEPT + 3);
  });

  it('a Job of no JobSet is not remembered', () => {
    assert.equal(rememberSpent(undefined, { image: IMAGE, pullClass: 'permanent', job: 'j', jobView: job('j') }, FAILED_AT), undefined);
  });
});

describe('jobset: a later restart attempt', () => {
  it('the JobSet restarted (restart-attempt higher): later', () => {
    assert.equal(laterAttempt({ name: 'train-worker-1', jobSet: member({ restartAttempt: 1 }) }, earlier()), true);
  });
  it('the same attempt, an earlier one, or unknown attempts: not later', () => {
    assert.equal(laterAttempt({ name: 'train-worker-1', jobSet: member({ restartAttempt: 0 }) }, earlier()), false);
    assert.equal(laterAttempt({ name: 'x', jobSet: member({ restartAttempt: 0 }) }, earlier({ restartAttempt: 1 })), false);
    assert.equal(laterAttempt({ name: 'x', jobSet: member({ restartAttempt: undefined }) }, earlier()), false);
    assert.equal(laterAttempt({ name: 'x', jobSet: member({ restartAttempt: 3 }) }, earlier({ restartAttempt: undefined })), false);
  });
  it('RestartJob: the same Job recreated (job-restart-attempt higher): later; another Job of that attempt: not', () => {
    const entry = earlier({ jobRestartAttempt: 0 });
    assert.equal(laterAttempt({ name: 'train-worker-0', jobSet: member({ restartAttempt: 0, jobRestartAttempt: 1 }) }, entry), true);
    assert.equal(laterAttempt({ name: 'train-worker-1', jobSet: member({ restartAttempt: 0, jobRestartAttempt: 1 }) }, entry), false);
    assert.equal(laterAttempt({ name: 'train-worker-0', jobSet: member({ restartAttempt: 0, jobRestartAttempt: 0 }) }, entry), false);
  });
});

describe('jobset: judging a restart whose grace is spent', () => {
  it('fails it at once, says so in the detail and the message, naming the earlier Job and the JobSet', () => {
    const j = job('train-worker-0', { jobSet: member() });
    const d = judgeOne(j);
    assert.equal(d.plan, 'fail');
    assert.equal(d.stuckSeconds, 3);
    assert.equal(d.graceSeconds, 120);
    assert.match(
      d.detail,
      /^grace already spent: imagepull-sweeper failed Job train-worker-0 \(restart attempt 0\) of JobSet train at 2026-11-29T11:58:00Z/,
    );
    const message = formatClaimMessage(d);
    assert.match(message, /JobSet train/);
    assert.match(message, /grace 2m from defaults, grace already spent/);
    assert.equal(parseClaimMessage(message)?.image, IMAGE, 'the message still parses');
  });

  it('another image, another class, or the same attempt: the full grace', () => {
    for (const [what, j, stuck] of [
      ['image', job('a', { jobSet: member() }), { image: 'registry.example/other:1' }],
      ['class', job('b', { jobSet: member() }), { pullClass: 'auth' as const }],
      ['attempt', job('c', { jobSet: member({ restartAttempt: 0 }) }), {}],
      ['memory', job('d', { jobSet: member({ remembered: undefined }) }), {}],
    ] as const) {
      const d = judgeOne(j, [stuckIn(j, { stuckSince: secondsAgo(3), ...stuck })]);
      assert.equal(d.plan, 'skip', what);
      assert.match(d.detail, /^within grace/, what);
    }
  });

  it('judges the container the memory names, of several stuck', () => {
    const j = job('train-worker-0', { jobSet: member() });
    const sidecar = stuckIn(j, { container: 'log', image: 'registry.example/log:1', stuckSince: secondsAgo(60) });
    const main = stuckIn(j, { stuckSince: secondsAgo(2) });
    const d = judgeOne(j, [sidecar, main]);
    assert.equal(d.plan, 'fail');
    assert.equal(d.container, 'main');
    assert.equal(spentByJobSet(j, [sidecar])?.container, undefined);
  });

  it('what leaves a Job alone still does; report-only rules report', () => {
    const ignored = job('i', { jobSet: member(), annotations: { 'imagepull-sweeper/ignore': 'true' } });
    assert.equal(judgeOne(ignored).plan, 'skip');
    const reported = judgeOne(job('r', { jobSet: member() }), undefined, 'defaults: { action: report }\n');
    assert.equal(reported.plan, 'report');
    assert.match(formatClaimMessage(reported), /grace already spent/);
  });

  it('an unreadable JobSet is a warning, and the Job gets its full grace', () => {
    const j = job('u', { jobSet: member({ remembered: undefined, unreadable: 'could not read JobSet train: forbidden' }) });
    const d = judgeOne(j);
    assert.equal(d.plan, 'skip');
    assert.deepEqual(d.warnings, ['could not read JobSet train: forbidden: its restarts get a full grace']);
  });

  it('a Job read again after a conflict keeps what was read on its JobSet', () => {
    const j = job('train-worker-0', { jobSet: member() });
    const stuck = [stuckIn(j, { stuckSince: secondsAgo(3) })];
    const parsed = parsePolicyYaml('{}');
    assert.ok(parsed.ok);
    const input: JudgeInput = { stuck, ownerOf: ownersFor(stuck, [j]), namespaceLabels: new Map(), policy: parsed.policy, now: NOW };
    const previous = judge(input).decisions[0]!;
    const { remembered: _dropped, ...fresh } = member();
    const again = rejudgeJob(input, previous, { ...j, resourceVersion: '101', jobSet: fresh });
    assert.equal(again.plan, 'fail');
    assert.match(again.detail, /^grace already spent/);
    const other = keepJobSetMemory(j, { ...j, jobSet: { ...fresh, uid: 'uid-other' } });
    assert.equal(other.jobSet?.remembered, undefined, 'a JobSet replaced since remembers nothing');
  });
});

describe('jobset: the attribute stage reads each JobSet once', () => {
  // Control flow only, scripted answers: what the API server answers is proven in test/e2e/node-jobset.test.ts.
  const owner = { apiVersion: 'jobset.x-k8s.io/v1alpha2', kind: 'JobSet', name: 'train', uid: 'uid-train', controller: true };
  const jobOf = (name: string) => ({
    metadata: {
      namespace: 'ml',
      name,
      uid: `uid-${name}`,
      resourceVersion: '1',
      ownerReferences: [owner],
      labels: { 'jobset.sigs.k8s.io/restart-attempt': '1' },
    },
    spec: { template: { spec: { containers: [{ name: 'main', image: IMAGE }] } } },
  });
  const stuckOf = (name: string): StuckContainer => ({
    ...stuckIn(undefined, { namespace: 'ml', pod: `${name}-pod` }),
    controller: { apiVersion: 'batch/v1', kind: 'Job', name, uid: `uid-${name}`, controller: true },
  });

  function gateway(answer: () => Promise<JobSetObject>): { gateway: KubeGateway; reads: string[] } {
    const reads: string[] = [];
    const g = {
      readJob: async (namespace: string, name: string) => jobOf(name),
      readJobSet: async (namespace: string, name: string) => (reads.push(`${namespace}/${name}`), answer()),
    } as unknown as KubeGateway;
    return { gateway: g, reads };
  }
  const options = { concurrency: 4, listConcurrency: 1, listThreshold: 10 };

  it('one read for two Jobs of one JobSet: the owner chain above it and its memory', async () => {
    const trainJob = { apiVersion: 'trainer.kubeflow.org/v1alpha1', kind: 'TrainJob', name: 'llm', uid: 'uid-llm', controller: true };
    const remembered = formatSpent([earlier()]);
    const { gateway: g, reads } = gateway(async () => ({
      metadata: { uid: 'uid-train', ownerReferences: [trainJob], annotations: { [ANNOTATIONS.jobSetSpent]: remembered } },
    }));
    const stuck = [stuckOf('train-worker-0'), stuckOf('train-worker-1')];
    const attribution = await attributeToJobs(g, stuck, options);
    assert.deepEqual(reads, ['ml/train']);
    for (const c of stuck) {
      const owner = attribution.ownerOf(c.podUid);
      assert.equal(owner.kind, 'job');
      if (owner.kind !== 'job') continue;
      assert.equal(owner.job.jobSet?.remembered, remembered);
      assert.equal(owner.job.jobSet?.restartAttempt, 1);
      assert.deepEqual(
        owner.job.owners.map((o) => o.kind),
        ['JobSet', 'TrainJob'],
      );
    }
  });

  it('a JobSet gone or replaced remembers nothing; one that cannot be read says why', async () => {
    const cases: [string, () => Promise<JobSetObject>, string | undefined][] = [
      ['gone', () => Promise.reject(Object.assign(new Error('not found'), { code: 404, body: '' })), undefined],
      [
        'replaced',
        async () => ({ metadata: { uid: 'uid-other', annotations: { [ANNOTATIONS.jobSetSpent]: formatSpent([earlier()]) } } }),
        undefined,
      ],
      [
        'forbidden',
        () => Promise.reject(Object.assign(new Error('jobsets is forbidden'), { code: 403, body: '' })),
        'could not read JobSet train',
      ],
    ];
    for (const [what, answer, unreadable] of cases) {
      const stuck = [stuckOf('train-worker-0')];
      const owner = (await attributeToJobs(gateway(answer).gateway, stuck, options)).ownerOf(stuck[0]!.podUid);
      assert.equal(owner.kind, 'job', what);
      if (owner.kind !== 'job') continue;
      assert.equal(owner.job.jobSet?.remembered, undefined, what);
      if (unreadable) assert.match(owner.job.jobSet?.unreadable ?? '', new RegExp(unreadable), what);
      else assert.equal(owner.job.jobSet?.unreadable, undefined, what);
    }
  });
});
