import type { Writable } from 'node:stream';
import winston from 'winston';
import TransportStream from 'winston-transport';
import { describeTrip } from '../judge/outage.ts';
import { isActionError, liveOutcome, outcomeWord, type Outcome } from '../outcomes.ts';
import { formatDuration } from '../policy/duration.ts';
import type { AuditLine, CronJobAuditLine, SweepSummary } from './audit.ts';
import { describeCapacity } from '../judge/capacity.ts';

export type OutputFormat = 'text' | 'json';

export const AUDIT_DECISION = 'decision';
export const AUDIT_SUMMARY = 'summary';
export const AUDIT_CRONJOB = 'cronjob';

export interface LoggerOptions {
  format: OutputFormat;
  stream?: Writable;
  level?: string;
}

/** JSON lines (one object per line) or a readable text rendering of the same facts. */
export function createLogger(options: LoggerOptions): winston.Logger {
  const format =
    options.format === 'json'
      ? winston.format.combine(winston.format.timestamp(), winston.format.json())
      : winston.format.printf((info) => renderText(info));
  return winston.createLogger({
    level: options.level ?? 'info',
    format,
    transports: [new LineTransport(options.stream ?? process.stdout)],
  });
}

/** winston's formatted line (triple-beam's MESSAGE). */
const MESSAGE = Symbol.for('message');

/**
 * Writes each formatted line and lets go of it. winston's own Stream transport also schedules a
 * 'logged' event per line (setImmediate), which holds every line of a batch that completes
 * without I/O (a dry run) until the batch ends (what that held: docs/performance.md).
 */
class LineTransport extends TransportStream {
  readonly #out: Writable;
  #room: Promise<void> | undefined;
  constructor(out: Writable) {
    super();
    this.#out = out;
  }
  override log(info: Record<symbol, unknown>, next: () => void): void {
    this.#out.write(`${String(info[MESSAGE])}\n`);
    next();
  }
  /** Undefined while the output takes lines; else one promise for every waiter, settled by 'drain' (or 'close'). */
  room(): Promise<void> | undefined {
    const out = this.#out;
    if (!out.writableNeedDrain || out.destroyed) return undefined;
    this.#room ??= new Promise<void>((resolve) => {
      const done = () => {
        out.off('drain', done);
        out.off('close', done);
        this.#room = undefined;
        resolve();
      };
      out.on('drain', done);
      out.on('close', done);
    });
    return this.#room;
  }
}

/**
 * Resolves once the log's output takes lines again (undefined: it does). A pipe to a slow log
 * reader queues in memory whatever the sweeper writes; a sweep that waits here before its next
 * decision keeps that queue to the stream's buffer (docs/performance.md).
 */
export function outputRoom(logger: winston.Logger): Promise<void> | undefined {
  for (const transport of logger.transports) if (transport instanceof LineTransport) return transport.room();
  return undefined;
}

export function logDecision(logger: winston.Logger, line: AuditLine): void {
  const level = isActionError(line) ? 'error' : line.warnings.length > 0 ? 'warn' : 'info';
  logger.log(level, AUDIT_DECISION, line);
}

export function logCronJob(logger: winston.Logger, line: CronJobAuditLine): void {
  logger.log(isActionError(line) ? 'error' : line.outcome === 'suspended' ? 'warn' : 'info', AUDIT_CRONJOB, line);
}

export function logSummary(logger: winston.Logger, summary: SweepSummary): void {
  logger.log(summary.exitCode === 0 ? 'info' : 'warn', AUDIT_SUMMARY, summary);
}

function renderText(info: winston.Logform.TransformableInfo): string {
  const fields = info as unknown as Record<string, unknown>;
  if (info.message === AUDIT_DECISION) return renderDecision(fields as unknown as AuditLine);
  if (info.message === AUDIT_SUMMARY) return renderSummary(fields as unknown as SweepSummary);
  if (info.message === AUDIT_CRONJOB) return renderCronJob(fields as unknown as CronJobAuditLine);
  const extras = Object.entries(fields)
    .filter(([k]) => k !== 'level' && k !== 'message' && typeof k === 'string')
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
  return [`${info.level}: ${String(info.message)}`, ...extras].join(' ');
}

/** The outcomes whose text line shows the hint: a Job failed or reported for its cause. */
const HINTED: ReadonlySet<Outcome> = new Set(['failed', 'reported', 'retried']);

function renderDecision(l: AuditLine): string {
  const word = outcomeWord(l.outcome, l.dryRun);
  const target = l.job ? `job/${l.job}${l.cronJob ? ` (cronjob/${l.cronJob})` : ''}` : `pod/${l.pod}`;
  const grace = l.graceSeconds === null ? '' : `/${formatDuration(l.graceSeconds)}`;
  const source = l.graceSource === null ? '' : ` grace=${l.graceSource}${l.graceClamped ? '(clamped)' : ''}`;
  const lines = [
    `${word.padEnd(12)} ${l.namespace}/${target}  ${l.containerKind} ${l.container} ${l.image}  ` +
      `${l.reason} ${l.class} stuck ${formatDuration(l.stuckSeconds)}${grace}  rule=${l.rule}${source} action=${l.action}`,
    `             ${l.detail}`,
  ];
  const freed = describeCapacity(l.freed ?? undefined);
  if (freed) lines.push(`             ${l.dryRun ? 'would free' : 'freed'} ${freed}`);
  if (HINTED.has(liveOutcome(l.outcome))) lines.push(`             hint: ${l.hint}`);
  if (l.heal) lines.push(`             heal: ${l.heal}`);
  if (l.error) lines.push(`             error: ${l.error}`);
  for (const w of l.warnings) lines.push(`             warning: ${w}`);
  return lines.join('\n');
}

function renderCronJob(l: CronJobAuditLine): string {
  const word = outcomeWord(l.outcome, l.dryRun);
  const run = l.failedInARow === null ? '' : `  ${l.failedInARow}/${l.suspendAfter} failed in a row on ${l.image ?? '?'}`;
  const lines = [
    `${word.padEnd(12)} ${l.namespace}/cronjob/${l.cronJob}${run}`,
    `             ${l.detail}${l.jobs.length > 0 ? ` (Jobs: ${l.jobs.join(', ')})` : ''}`,
  ];
  if (l.error) lines.push(`             error: ${l.error}`);
  return lines.join('\n');
}

function renderSummary(s: SweepSummary): string {
  const counts = Object.entries(s.outcomes)
    .filter(([, n]) => n > 0)
    .map(([o, n]) => `${n} ${outcomeWord(o, s.dryRun).toLowerCase()}`)
    .join(', ');
  const namespaces = s.namespaces.length > 0 ? s.namespaces.join(',') : 'all namespaces';
  return [
    `${s.dryRun ? 'Dry run' : 'Sweep'} ${s.sweepId}: ${s.decisions} decision(s)${counts ? ` (${counts})` : ''} ` +
      `in ${s.durationMs} ms; ${s.podsScanned} pending pod(s) scanned in ${namespaces}; policy ${s.policy}.`,
    ...(s.deferred > 0 ? [`${s.deferred} Job(s) deferred to the next sweep by limits or a stop.`] : []),
    ...(s.cronJobs?.suspended ? [`${s.cronJobs.suspended} CronJob(s) suspended.`] : []),
    ...(s.cronJobs?.['would-suspend'] ? [`${s.cronJobs['would-suspend']} CronJob(s) would be suspended.`] : []),
    ...freedLine(s),
    ...(s.awaitingFailed > 0 ? [`${s.awaitingFailed} Job(s) failed by the sweeper, not yet Failed by the Job controller.`] : []),
    ...(s.outage.tripped
      ? s.outage.trips.map((t) => `Outage breaker tripped for ${describeTrip(t)}: those Jobs are reported, not failed.`)
      : []),
    ...(s.actionErrors > 0 ? [`${s.actionErrors} action(s) failed; see the error lines above.`] : []),
  ].join('\n');
}

/** "Freed 4 nvidia.com/gpu, 8 cpu held 3h12m in total by 2 pods." */
function freedLine(s: SweepSummary): string[] {
  const freed = describeCapacity(s.freed);
  return freed ? [`${s.dryRun ? 'Would free' : 'Freed'} ${freed}${s.freed.pods > 1 ? '' : ' in total'}.`] : [];
}
