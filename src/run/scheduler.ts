import { CronExpressionParser } from 'cron-parser';
import type winston from 'winston';
import { RunOptionError } from './errors.ts';
import type { SweepResult } from '../sweep.ts';

export interface Schedule {
  /** The first scheduled time strictly after `after`. */
  next(after: Date): Date;
}

/** Standard 5-field cron, or 6 fields with seconds first; `timezone` is an IANA name. */
export function parseSchedule(expression: string, timezone?: string): Schedule {
  const fields = expression.trim().split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6) {
    throw new RunOptionError(`--schedule "${expression}": expected 5 cron fields (or 6 with seconds), got ${fields.length}`);
  }
  if (timezone !== undefined) {
    try {
      new Intl.DateTimeFormat('en', { timeZone: timezone });
    } catch {
      throw new RunOptionError(`--timezone ${timezone}: unknown time zone`);
    }
  }
  try {
    CronExpressionParser.parse(expression, { tz: timezone, strict: false }).next();
  } catch (error) {
    throw new RunOptionError(`--schedule "${expression}": ${(error as Error).message}`);
  }
  return {
    next: (after) => CronExpressionParser.parse(expression, { tz: timezone, currentDate: after }).next().toDate(),
  };
}

export interface SchedulerDeps {
  clock: () => Date;
  logger: winston.Logger;
  /** Resolves after `ms`, or early when `signal` aborts. */
  sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  sweepOnce: () => Promise<SweepResult>;
  onSweep?: (result: SweepResult | undefined, seconds: number, finishedAt: Date) => void;
}

/**
 * Sweeps on the schedule until `stop` aborts. Sweeps never overlap: one that overruns delays the
 * next (and says so). On stop, the sweep in flight finishes first.
 */
export async function runOnSchedule(schedule: Schedule, deps: SchedulerDeps, stop: AbortSignal): Promise<void> {
  const { clock, logger } = deps;
  let next = schedule.next(clock());
  while (!stop.aborted) {
    logger.info('next sweep scheduled', { at: next.toISOString() });
    // Sleep in chunks: timers cannot span more than ~24 days, and the clock may jump.
    while (!stop.aborted && clock().getTime() < next.getTime()) {
      await deps.sleep(Math.min(next.getTime() - clock().getTime(), 3_600_000), stop);
    }
    if (stop.aborted) break;
    const started = clock();
    let result: SweepResult | undefined;
    try {
      result = await deps.sweepOnce();
    } catch (error) {
      logger.error('sweep crashed', { error: (error as Error).message, stack: (error as Error).stack });
    }
    const finished = clock();
    deps.onSweep?.(result, (finished.getTime() - started.getTime()) / 1000, finished);
    const following = schedule.next(finished);
    const missed = countBetween(schedule, next, finished);
    if (missed > 0) {
      logger.warn('sweep overran the schedule; missed runs are not made up', {
        missedRuns: missed,
        scheduledAt: next.toISOString(),
        finishedAt: finished.toISOString(),
      });
    }
    next = following;
  }
  logger.info('stopping: no sweep in flight');
}

function countBetween(schedule: Schedule, after: Date, until: Date): number {
  let count = 0;
  for (let t = schedule.next(after); t.getTime() <= until.getTime() && count < 1000; t = schedule.next(t)) count += 1;
  return count;
}

export function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
