// Jobs Kueue queues (docs/kueue.md). Kueue's waitForPodsReady evicts a Job whose pods are not
// ready in time: it suspends the Job (the Job controller deletes its pods) and admits it again
// later, with new pods, whose stuck clock starts from zero. What the sweeper needs to carry the
// time stuck across admissions is kept on the Job itself (annotation imagepull-sweeper/stuck):
// the cause (image, class, the container and the kubelet's words), the seconds stuck in the
// admissions that ended, and when the open admission's container got stuck. Written when a
// cause is first seen in an admission, and when the sweeper sees the Job suspended (the
// admission's end is the Job's Suspended condition, on the API server's clock). Pure.
import { isStuckReason, PULL_CLASSES, type ContainerKind, type JobView, type PullClass, type StuckContainer } from '../model.ts';
import { ANNOTATIONS } from '../policy/annotations.ts';
import { formatDuration } from '../policy/duration.ts';
import type { GraceSeconds, Policy } from '../policy/types.ts';
import { truncate } from '../text.ts';
import { secondsBetween } from './decision.ts';

/** What the sweeper remembers of a queued Job's cause. */
export interface StuckMemory {
  image: string;
  pullClass: PullClass;
  reason: string;
  container: string;
  containerKind: ContainerKind;
  pod: string;
  /** The kubelet's words, cut to MESSAGE_KEPT. */
  message: string;
  /** Seconds stuck on this cause in admissions that ended. */
  stuckSeconds: number;
  /** Admissions that ended while stuck on it (Kueue's evictions the sweeper counted). */
  evictions: number;
  /** The open admission: when its container got stuck, and when the sweeper first saw it so (RFC 3339). */
  since?: string;
  seen?: string;
}

/** The kubelet's words kept with the cause: enough for the message of a Job failed while it has no pod. */
const MESSAGE_KEPT = 1024;

export function readStuckMemory(raw: string | undefined): StuckMemory | undefined {
  if (raw === undefined) return undefined;
  let m: Partial<StuckMemory>;
  try {
    m = JSON.parse(raw) as Partial<StuckMemory>;
  } catch {
    return undefined;
  }
  if (typeof m !== 'object' || m === null || typeof m.image !== 'string' || typeof m.container !== 'string') return undefined;
  if (!(PULL_CLASSES as readonly string[]).includes(m.pullClass ?? '')) return undefined;
  const count = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0);
  const time = (v: unknown) => (typeof v === 'string' && !Number.isNaN(new Date(v).getTime()) ? v : undefined);
  const since = time(m.since);
  const seen = time(m.seen);
  return {
    image: m.image,
    pullClass: m.pullClass!,
    reason: typeof m.reason === 'string' ? m.reason : '',
    container: m.container,
    containerKind: m.containerKind === 'init' || m.containerKind === 'sidecar' ? m.containerKind : 'regular',
    pod: typeof m.pod === 'string' ? m.pod : '',
    message: typeof m.message === 'string' ? m.message : '',
    stuckSeconds: count(m.stuckSeconds),
    evictions: count(m.evictions),
    ...(since ? { since } : {}),
    ...(since && seen ? { seen } : {}),
  };
}

export function formatStuckMemory(m: StuckMemory): string {
  return JSON.stringify(m);
}

/** The memory a Job carries, when Kueue manages it. */
export function stuckMemoryOf(job: Pick<JobView, 'queue' | 'annotations'>): StuckMemory | undefined {
  return job.queue ? readStuckMemory(job.annotations[ANNOTATIONS.stuck]) : undefined;
}

/** What earlier admissions add to a container stuck on the remembered cause. */
export interface Carried {
  seconds: number;
  evictions: number;
}

const sameCause = (m: StuckMemory, c: Pick<StuckContainer, 'image' | 'pullClass'>) => m.image === c.image && m.pullClass === c.pullClass;
const sameInstant = (a: string | undefined, b: Date) => a !== undefined && new Date(a).getTime() === b.getTime();
/**
 * Still the admission the memory was written in: the same pod (a new admission has new pods,
 * and a pod's stuck clock can move when its sandbox is recreated, docs/clock.md), or the same
 * stuck time.
 */
const sameAdmission = (m: StuckMemory, c: Pick<StuckContainer, 'pod' | 'stuckSince'>) =>
  (m.pod !== '' && m.pod === c.pod) || sameInstant(m.since, c.stuckSince);

/**
 * The seconds and evictions of the admissions before this container's: none for another cause.
 * An admission the sweeper never saw end (the Job was evicted and admitted again between two
 * sweeps) counts from its container's stuck time to when the sweeper first saw it stuck: no
 * less than it surely lasted.
 */
export function carriedFor(
  m: StuckMemory | undefined,
  c: Pick<StuckContainer, 'image' | 'pullClass' | 'pod' | 'stuckSince'>,
): Carried | undefined {
  if (!m || !sameCause(m, c)) return undefined;
  if (m.since === undefined || sameAdmission(m, c)) return { seconds: m.stuckSeconds, evictions: m.evictions };
  return { seconds: m.stuckSeconds + missedSeconds(m), evictions: m.evictions + 1 };
}

function missedSeconds(m: StuckMemory): number {
  return m.since && m.seen ? Math.max(0, Math.floor(secondsBetween(new Date(m.since), new Date(m.seen)))) : 0;
}

/** The container as judged across admissions: stuck since that much earlier. */
export function withCarried(c: StuckContainer, carried: Carried | undefined): StuckContainer {
  return carried && carried.seconds > 0 ? { ...c, stuckSince: new Date(c.stuckSince.getTime() - carried.seconds * 1000) } : c;
}

/** `stuck 45s in 2 earlier admissions (Kueue evicted it)`, for the detail and the message. */
export function describeCarried(carried: Carried): string {
  return `stuck ${formatDuration(carried.seconds)} in ${carried.evictions} earlier admission(s) Kueue ended`;
}

/**
 * The memory after seeing `c` (as it is, not shifted) stuck in an open admission, or undefined
 * when the Job already carries it: written once per cause and admission.
 */
export function rememberStuck(m: StuckMemory | undefined, c: StuckContainer, now: Date): string | undefined {
  if (m && sameCause(m, c) && sameInstant(m.since, c.stuckSince)) return undefined;
  const carried = carriedFor(m, c);
  return formatStuckMemory({
    image: c.image,
    pullClass: c.pullClass,
    reason: c.reason,
    container: c.container,
    containerKind: c.containerKind,
    pod: c.pod,
    message: truncate(c.message, MESSAGE_KEPT),
    stuckSeconds: carried?.seconds ?? 0,
    evictions: carried?.evictions ?? 0,
    since: iso(c.stuckSince),
    seen: iso(now),
  });
}

/**
 * The memory of a suspended Job with its admission closed: the seconds from its container's
 * stuck time to the suspension (Kueue's eviction) added, or undefined when it was closed already.
 */
export function closeAdmission(m: StuckMemory, suspendedSince: Date): StuckMemory | undefined {
  if (m.since === undefined) return undefined;
  const since = new Date(m.since);
  const ended = suspendedSince >= since ? Math.floor(secondsBetween(since, suspendedSince)) : missedSeconds(m);
  const { since: _since, seen: _seen, ...closed } = m;
  return { ...closed, stuckSeconds: m.stuckSeconds + ended, evictions: m.evictions + 1 };
}

/** The stuck container a memory describes, stuck since `stuckSeconds` before now (for a Job that has no pod). */
export function rememberedContainer(job: JobView, m: StuckMemory, now: Date): StuckContainer {
  return {
    namespace: job.namespace,
    pod: m.pod,
    podUid: '',
    podResourceVersion: '',
    container: m.container,
    containerKind: m.containerKind,
    image: m.image,
    reason: isStuckReason(m.reason) ? m.reason : m.pullClass === 'stalled' ? 'ContainerCreating' : 'ImagePullBackOff',
    message: m.message,
    pullClass: m.pullClass,
    stuckSince: new Date(now.getTime() - m.stuckSeconds * 1000),
    controller: undefined,
  };
}

function iso(date: Date): string {
  return date.toISOString();
}

/** Kueue's waitForPodsReady timeout that applies to the Jobs it queues, and what it was read from. */
export interface KueueTimeout {
  seconds: number;
  /** e.g. `waitForPodsReady.timeout in ConfigMap kueue-system/kueue-manager-config`. */
  source: string;
}

/** Says so when a grace is not shorter than Kueue's timeout: Kueue evicts the Job before the sweeper would fail it. */
export function kueueTimeoutWarning(
  pullClass: PullClass,
  grace: { seconds: number; from: string },
  timeout: KueueTimeout,
): string | undefined {
  if (grace.seconds < timeout.seconds) return undefined;
  return (
    `the ${pullClass} grace ${formatDuration(grace.seconds)} (${grace.from}) is not shorter than Kueue's timeout ` +
    `${formatDuration(timeout.seconds)} (${timeout.source}): Kueue evicts such a Job first, and its time stuck is added up ` +
    'across admissions (docs/kueue.md)'
  );
}

/** Every grace of the policy (its defaults, and each Job rule's own) not shorter than Kueue's timeout, said once each. */
export function policyKueueWarnings(policy: Policy, timeout: KueueTimeout): string[] {
  const out: string[] = [];
  const check = (grace: Partial<GraceSeconds>, from: string) => {
    for (const c of PULL_CLASSES) {
      const seconds = grace[c];
      const warning = seconds === undefined ? undefined : kueueTimeoutWarning(c, { seconds, from }, timeout);
      if (warning) out.push(warning);
    }
  };
  check(policy.defaults.grace, 'defaults');
  for (const rule of policy.rules) if (!rule.owners && rule.action !== 'ignore' && rule.grace) check(rule.grace, `rule ${rule.name}`);
  return out;
}
