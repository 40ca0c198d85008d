// A JobSet restarts all its Jobs (or one, with `RestartJob`) when a child Job fails; the restart
// pulls the same image again. What the sweeper remembers on the JobSet (its annotation
// imagepull-sweeper/spent) says which Jobs it failed, on which image and class, in which restart
// attempt: a Job of a later attempt stuck the same way has no grace left (docs/jobset.md). Pure.
import { PULL_CLASSES, type JobView, type PullClass, type SpentGrace, type StuckContainer } from '../model.ts';
import type { Decision } from './types.ts';

/** The most recent failures kept on a JobSet (a JobSet restarts at most `maxRestarts` times). */
export const SPENT_KEPT = 16;

interface StoredEntry {
  image: string;
  class: string;
  job: string;
  restartAttempt?: number;
  jobRestartAttempt?: number;
  at: string;
}

/** The entries of the annotation, oldest first; entries that are not ones are dropped. */
export function readSpent(raw: string | undefined): SpentGrace[] {
  if (raw === undefined) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return [];
  }
  if (!Array.isArray(parsed)) return [];
  const out: SpentGrace[] = [];
  for (const e of parsed as Partial<StoredEntry>[]) {
    if (typeof e !== 'object' || e === null) continue;
    const { image, job, at } = e;
    if (typeof image !== 'string' || typeof job !== 'string' || typeof at !== 'string') continue;
    if (!(PULL_CLASSES as readonly string[]).includes(e.class ?? '')) continue;
    out.push({
      image,
      pullClass: e.class as PullClass,
      job,
      restartAttempt: count(e.restartAttempt),
      jobRestartAttempt: count(e.jobRestartAttempt),
      at,
    });
  }
  return out;
}

function count(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined;
}

export function formatSpent(entries: readonly SpentGrace[]): string {
  const stored = entries.map((e): StoredEntry => ({
    image: e.image,
    class: e.pullClass,
    job: e.job,
    ...(e.restartAttempt === undefined ? {} : { restartAttempt: e.restartAttempt }),
    ...(e.jobRestartAttempt === undefined ? {} : { jobRestartAttempt: e.jobRestartAttempt }),
    at: e.at,
  }));
  return JSON.stringify(stored);
}

/** Whether `job` was created by a later restart than the one whose Job `entry` records. */
export function laterAttempt(job: Pick<JobView, 'name' | 'jobSet'>, entry: SpentGrace): boolean {
  const member = job.jobSet;
  if (!member || member.restartAttempt === undefined || entry.restartAttempt === undefined) return false;
  if (member.restartAttempt > entry.restartAttempt) return true;
  // The JobSet recreated this one Job (failure policy RestartJob): same name, a later per-Job attempt.
  return (
    member.restartAttempt === entry.restartAttempt &&
    entry.job === job.name &&
    member.jobRestartAttempt !== undefined &&
    entry.jobRestartAttempt !== undefined &&
    member.jobRestartAttempt > entry.jobRestartAttempt
  );
}

export interface Spent {
  container: StuckContainer;
  by: SpentGrace;
  /** Says so, for the audit detail, the Job's message and its Event. */
  text: string;
}

/** The first of the Job's stuck containers whose grace an earlier attempt of its JobSet already spent. */
export function spentByJobSet(job: JobView, containers: readonly StuckContainer[]): Spent | undefined {
  const member = job.jobSet;
  if (!member?.remembered) return undefined;
  const entries = readSpent(member.remembered);
  for (const container of containers) {
    const by = entries.findLast((e) => e.image === container.image && e.pullClass === container.pullClass && laterAttempt(job, e));
    if (by) return { container, by, text: describeSpent(member.name, by) };
  }
  return undefined;
}

export function describeSpent(jobSet: string, by: SpentGrace): string {
  const attempt = by.restartAttempt === undefined ? '' : ` (restart attempt ${by.restartAttempt})`;
  return (
    `grace already spent: imagepull-sweeper failed Job ${by.job}${attempt} of JobSet ${jobSet} at ${by.at}, ` +
    `stuck on the same image with class ${by.pullClass}; this restart is failed at once`
  );
}

/**
 * The annotation value that adds the failure `d` decides, or undefined when the JobSet already
 * remembers it (a sweep repeated, or a retry after a lost answer).
 */
export function rememberSpent(
  raw: string | undefined,
  d: Pick<Decision, 'image' | 'pullClass' | 'job' | 'jobView'>,
  at: string,
): string | undefined {
  const member = d.jobView?.jobSet;
  if (!member || !d.job) return undefined;
  const entries = readSpent(raw);
  const entry: SpentGrace = {
    image: d.image,
    pullClass: d.pullClass,
    job: d.job,
    restartAttempt: member.restartAttempt,
    jobRestartAttempt: member.jobRestartAttempt,
    at,
  };
  const same = (e: SpentGrace) =>
    e.image === entry.image &&
    e.pullClass === entry.pullClass &&
    e.job === entry.job &&
    e.restartAttempt === entry.restartAttempt &&
    e.jobRestartAttempt === entry.jobRestartAttempt;
  if (entries.some(same)) return undefined;
  return formatSpent([...entries, entry].slice(-SPENT_KEPT));
}

/** A Job read again (after a conflict) keeps what the sweep read on its JobSet, when it is still the same JobSet's. */
export function keepJobSetMemory(previous: JobView | undefined, fresh: JobView): JobView {
  const before = previous?.jobSet;
  if (!before || !fresh.jobSet || fresh.jobSet.uid !== before.uid) return fresh;
  const { remembered, unreadable } = before;
  return {
    ...fresh,
    jobSet: { ...fresh.jobSet, ...(remembered === undefined ? {} : { remembered }), ...(unreadable ? { unreadable } : {}) },
  };
}
