// Connecting to the cluster and preparing a sweep from the command's flags: what \`sweep\`, \`run\`
// and \`policy explain\` share.
import type { Writable } from 'node:stream';
import type { KubeGateway } from '../kube/gateway.ts';
import type { ClientSettings, ResponseObserver } from '../kube/http.ts';
import { DEFAULT_KUBE_API_BURST, DEFAULT_KUBE_API_QPS, tokenBucket } from '../kube/rate-limit.ts';
import type { RetryNotice } from '../kube/retrying.ts';
import { DEFAULT_REQUEST_TIMEOUT_MS } from '../kube/timeout.ts';
import { formatDuration, tryParseGoDuration } from '../policy/duration.ts';
import type { OutputFormat } from '../report/logger.ts';
import type { DryRunMode, SweepDeps, SweepOptions } from '../sweep.ts';
import { dryRunOptions } from './dry-run.ts';
import { UsageError } from './errors.ts';
import { instanceName, kueueConfigLocation, policyLocation } from './kube.ts';

export interface CliIo {
  stdout: Writable & { isTTY?: boolean };
  stderr: Writable;
  readStdin: () => Promise<string>;
  /** For `sweep` and `run`: calls `stop` when SIGTERM/SIGINT arrives. */
  onStopSignal: (stop: () => void) => void;
}

export interface ConnectionFlags {
  kubeconfig?: string;
  context?: string;
  requestTimeout?: string;
  kubeApiQps?: string;
  kubeApiBurst?: string;
}

export interface PolicyFlags {
  policyConfigmap?: string;
  policyFile?: string;
  /** Kueue's configuration ConfigMap, NS/NAME (docs/kueue.md). */
  kueueConfig?: string;
}

export interface SweepFlags extends ConnectionFlags, PolicyFlags {
  /** `--dry-run` alone is `client`. */
  dryRun?: DryRunMode;
  namespace?: string[];
  output?: OutputFormat;
}

/** Loaded only by the commands that talk to a cluster: client-node is most of the start-up cost. */
export async function connectedGateway(
  flags: ConnectionFlags,
  onRetry: (n: RetryNotice) => void,
  onResponse?: ResponseObserver,
  settings: ClientSettings = clientSettings(flags),
): Promise<KubeGateway> {
  const timeoutMs = requestTimeoutMs(flags.requestTimeout);
  const [{ loadKubeConfig }, { createGateway }, { withRetries, hedgeAfterMs }] = await Promise.all([
    import('./kube-config.ts'),
    import('../kube/gateway.ts'),
    import('../kube/retrying.ts'),
  ]);
  return withRetries(createGateway(loadKubeConfig(flags), { timeoutMs, onResponse, settings }), {
    onRetry,
    signal: settings.fence,
    hedgeAfterMs: hedgeAfterMs(timeoutMs),
  });
}

/**
 * What every request of the process shares: the rate limit of --kube-api-qps/--kube-api-burst,
 * and each distinct Warning header logged once (`warn` set once the logger exists).
 */
export function clientSettings(flags: ConnectionFlags, fence?: AbortSignal): ClientSettings & { warn?: (text: string) => void } {
  const qps = numberFlag('--kube-api-qps', flags.kubeApiQps, DEFAULT_KUBE_API_QPS);
  const burst = numberFlag('--kube-api-burst', flags.kubeApiBurst, DEFAULT_KUBE_API_BURST);
  if (qps > 0 && burst < 1) throw new UsageError(`--kube-api-burst ${burst}: must be at least 1 when --kube-api-qps is set`);
  const warned = new Set<string>();
  const settings: ClientSettings & { warn?: (text: string) => void } = {
    rateLimiter: tokenBucket(qps, burst),
    ...(fence ? { fence } : {}),
    onWarning: (text) => {
      if (warned.has(text) || warned.size >= 1000) return;
      warned.add(text);
      settings.warn?.(text);
    },
  };
  return settings;
}

function numberFlag(flag: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (text.trim() === '' || !Number.isFinite(value) || value < 0) throw new UsageError(`${flag} ${text}: expected a number, 0 or more`);
  return value;
}

/** `onResponse`: `run`'s API request metrics. */
export async function prepareSweep(
  flags: SweepFlags,
  io: CliIo,
  onResponse?: ResponseObserver,
  settings: ReturnType<typeof clientSettings> = clientSettings(flags),
): Promise<{ deps: SweepDeps; options: SweepOptions; sweep: typeof import('../sweep.ts').sweep }> {
  const policy = policyLocation(flags, io.readStdin);
  const [{ createLogger }, { sweep }] = await Promise.all([import('../report/logger.ts'), import('../sweep.ts')]);
  const logger = createLogger({ format: outputFormat(flags.output, io), stream: io.stdout });
  settings.warn = (warning) => logger.warn('the API server warned', { warning });
  const gateway = await connectedGateway(flags, (n) => logger.warn(retryLine(n), retryFields(n)), onResponse, settings);
  return {
    sweep,
    deps: { gateway, monotonicMs: () => performance.now(), logger },
    options: {
      ...dryRunOptions(flags.dryRun),
      namespaces: flags.namespace ?? [],
      policy,
      kueueConfig: kueueConfigLocation(flags.kueueConfig),
      instance: instanceName(),
    },
  };
}

export async function tryGateway(
  flags: ConnectionFlags,
  required: boolean,
  onRetry: (n: RetryNotice) => void,
): Promise<KubeGateway | undefined> {
  try {
    return await connectedGateway(flags, onRetry);
  } catch (error) {
    if (required) throw error;
    return undefined;
  }
}

/** One warn line per retried request (what, why, which attempt, how long until the next), or for one given up on. */
export function retryLine(n: RetryNotice): string {
  const why = `${n.failure.status === undefined ? '' : `${n.failure.status} `}${n.failure.reason}: ${n.failure.message}`;
  if (n.delayMs === undefined) return `gave up on ${n.request} after attempt ${n.attempt} (${why})`;
  return `retrying ${n.request} after attempt ${n.attempt} (${why}) in ${n.delayMs} ms`;
}

export function retryFields(n: RetryNotice): Record<string, unknown> {
  return { request: n.request, status: n.failure.status, reason: n.failure.reason, attempt: n.attempt, delayMs: n.delayMs };
}

export function requestTimeoutMs(text: string | undefined): number {
  return durationFlagMs('--request-timeout', text, DEFAULT_REQUEST_TIMEOUT_MS);
}

/** A duration flag (Go syntax, more than 0) in milliseconds; `defaultMs` when it is not given. */
export function durationFlagMs(flag: string, text: string | undefined, defaultMs: number): number {
  if (text === undefined) return defaultMs;
  const parsed = tryParseGoDuration(text);
  if (!parsed.ok || parsed.seconds <= 0) throw new UsageError(`${flag} ${text}: ${parsed.ok ? 'must be more than 0' : parsed.error}`);
  return parsed.seconds * 1000;
}

/** A default as its flag shows it (`30s`). */
export function shownDuration(ms: number): string {
  return formatDuration(ms / 1000);
}

export function outputFormat(flag: OutputFormat | undefined, io: CliIo): OutputFormat {
  return flag ?? (io.stdout.isTTY ? 'text' : 'json');
}
