// Jobs Kueue has suspended (evicted) while they were stuck, found by their `pending=queued` label
// (docs/kueue.md): their admission is closed into what the Job remembers, and a Job whose cause
// needs no more pulls gets its FailureTarget while it waits, so it ends when Kueue admits it
// again, before a pod is created. Pure.
import { ANNOTATIONS, ignoredByAnnotation, PENDING } from '../policy/annotations.ts';
import { formatDuration } from '../policy/duration.ts';
import { describeGraceSource, graceForJob, resolveForNamespace } from '../policy/resolve.ts';
import type { Policy } from '../policy/types.ts';
import type { JobView, PullClass } from '../model.ts';
import { makeDecision } from './decision.ts';
import { BUILTIN_JOB_CONTROLLER } from './judge.ts';
import {
  closeAdmission,
  describeCarried,
  formatStuckMemory,
  kueueTimeoutWarning,
  rememberedContainer,
  stuckMemoryOf,
  type KueueTimeout,
  type StuckMemory,
} from './queue.ts';
import type { Decision } from './types.ts';

export interface QueuedInput {
  /** The Jobs of the pending list (their label says which are queued). */
  labelled: readonly JobView[];
  /** The sweep's decisions: a Job with a stuck pod now is judged there. */
  decisions: readonly Decision[];
  policy: Policy;
  namespaceLabels: ReadonlyMap<string, Record<string, string>>;
  now: Date;
  kueueTimeout?: KueueTimeout;
}

/**
 * The classes the outage breaker holds (a registry or a credential service down): judged only
 * while their pods are stuck, where the breaker sees them. Kueue's next admission is a retry.
 */
const JUDGED_ONLY_LIVE: ReadonlySet<PullClass> = new Set(['transient', 'auth']);

/** One decision per suspended queued Job the sweeper remembers an open admission of, or a cause of that needs no more pulls. */
export function judgeQueued(input: QueuedInput): Decision[] {
  const judged = new Set(input.decisions.flatMap((d) => (d.jobView ? [d.jobView.uid] : [])));
  const out: Decision[] = [];
  for (const job of input.labelled) {
    if (job.pendingLabel !== PENDING.queued || judged.has(job.uid)) continue;
    if (job.finished || job.deleting || job.annotations[ANNOTATIONS.failedAt] !== undefined) continue;
    const memory = stuckMemoryOf(job);
    const suspendedSince = job.queue?.suspendedSince;
    if (!memory || !suspendedSince) continue;
    const d = whileSuspended(job, memory, suspendedSince, input);
    if (d) out.push(d);
  }
  return out;
}

function whileSuspended(job: JobView, memory: StuckMemory, suspendedSince: Date, input: QueuedInput): Decision | undefined {
  if (ignoredByAnnotation(job.annotations).ignored) return undefined;
  if (job.managedBy !== undefined && job.managedBy !== BUILTIN_JOB_CONTROLLER) return undefined;
  const closed = closeAdmission(memory, suspendedSince);
  const m = closed ?? memory;
  const effective = resolveForNamespace(input.policy, { name: job.namespace, labels: input.namespaceLabels.get(job.namespace) ?? {} });
  if (effective.action === 'ignore') return undefined;
  const jobGrace = graceForJob(effective, job.annotations);
  const graceSeconds = jobGrace.grace[m.pullClass];
  const graceSource = jobGrace.sources[m.pullClass];
  const graceFrom = `${formatDuration(graceSeconds)} from ${describeGraceSource(graceSource)}`;
  const carried = describeCarried({ seconds: m.stuckSeconds, evictions: m.evictions });
  const warnings = [...jobGrace.warnings];
  const warning =
    input.kueueTimeout &&
    kueueTimeoutWarning(m.pullClass, { seconds: graceSeconds, from: describeGraceSource(graceSource) }, input.kueueTimeout);
  if (warning) warnings.push(warning);
  const spent =
    m.pullClass === 'permanent'
      ? 'its permanent cause is known'
      : !JUDGED_ONLY_LIVE.has(m.pullClass) && m.stuckSeconds >= graceSeconds
        ? `its grace (${graceFrom}) is spent`
        : undefined;
  const fields = { rule: effective.rule, action: effective.action, job, stuckPods: 0, graceSeconds, graceSource, warnings };
  // The closed admission is written with the decision: in the claim, or alone.
  const remember = closed ? { remember: formatStuckMemory(closed) } : {};
  const container = rememberedContainer(job, m, input.now);
  if (spent && effective.action === 'fail') {
    const d = makeDecision(container, input.now, {
      ...fields,
      plan: 'fail',
      mechanism: 'condition',
      detail:
        `suspended by Kueue while stuck, ${carried}; ${spent}: failed while it waits in its queue, ` +
        'and the Job controller ends it when Kueue admits it again, before it creates a pod',
    });
    return { ...d, queued: carried, ...remember };
  }
  if (!closed) return undefined;
  const live = JUDGED_ONLY_LIVE.has(m.pullClass)
    ? `; the ${m.pullClass} class is judged while its pods are stuck, where the outage breaker sees them`
    : '';
  const d = makeDecision(container, input.now, {
    ...fields,
    plan: 'skip',
    detail: `suspended by Kueue while stuck, ${carried} of grace ${graceFrom}: waits in its queue${live}`,
  });
  return { ...d, queued: carried, ...remember };
}
