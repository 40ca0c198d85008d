// The retry policy, decided once for every call the sweeper makes: what is safe to repeat, how
// long to wait, and how a write whose response was lost is made idempotent.
import { setTimeout as delay } from 'node:timers/promises';
import type { V1CronJob, V1Job } from '@kubernetes/client-node';
import { describeApiError, isRetryable, markMayHaveLanded, type ApiFailure } from './errors.ts';
import type { JobSetObject, KubeGateway } from './gateway.ts';
import type { LeaseGateway, LeaseSpec } from './leases.ts';
import { carriesAnnotations, isConditional, isConflict, judgeWriteError } from './write-outcome.ts';

export interface RetryNotice {
  /** The gateway method and its target, e.g. `readJob ci/build-7`. */
  request: string;
  failure: ApiFailure;
  /** The attempt that failed (1-based). */
  attempt: number;
  /** The wait before the next attempt; absent when the attempts ran out and the failure is the caller's. */
  delayMs?: number;
}

export interface RetryPolicy {
  attempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  /** Up to this fraction more, at random, on each back-off (not on a Retry-After): concurrent retries spread out. */
  jitter: number;
  random: () => number;
  /** Ends the waits early; an aborted signal stops retrying (the last error is thrown). */
  signal?: AbortSignal;
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Called once per retried request, before the wait, and once more (without `delayMs`) when the attempts run out. */
  onRetry?: (notice: RetryNotice) => void;
  /** A single-object read unanswered this long is sent once more beside the first (`hedged`); none when unset. */
  hedgeAfterMs?: number;
}

/** When to hedge a read: a quarter of the request timeout, at most a second. */
export const hedgeAfterMs = (requestTimeoutMs: number): number => Math.min(1_000, Math.round(requestTimeoutMs / 4));

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  attempts: 4,
  baseDelayMs: 250,
  maxDelayMs: 10_000,
  jitter: 0.5,
  random: Math.random,
  sleep: (ms, signal) => delay(ms, undefined, { signal }).catch(() => undefined),
};

/** Errors of a hedged call that had sent more than one copy: a conflict may be the other copy's. */
const fromHedge = new WeakSet<object>();

/** `error` ended a hedged call that had sent a second copy. */
export function cameFromHedge(error: unknown): boolean {
  return typeof error === 'object' && error !== null && fromHedge.has(error);
}

/**
 * A call not answered within `afterMs` is sent once more beside the first; the first answer wins.
 * A call whose answer is slow (a stalled connection, a busy server) then costs `afterMs`, not the
 * request timeout and a back-off; when the second copy fails, the call fails with it at once (to
 * the retries), not when the stalled first one times out. Hedged are single-object reads, safe
 * to repeat, and writes conditional on a resourceVersion (`conditionalWrite`): of two copies at
 * most one can land, the other answering 409. For those a 409 ends the call at once (the version
 * it was conditional on is gone, so the other copy cannot land after it), marked `cameFromHedge`
 * so that the retry layer reads the object back as after a retry; an error of a copy that may have
 * landed marks the call's error so (`mayHaveLanded`).
 */
export function hedged<T>(call: () => Promise<T>, afterMs: number | undefined, conditionalWrite = false): Promise<T> {
  if (afterMs === undefined) return call();
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    let sent = 0;
    let inFlight = 0;
    let mayHaveLanded = false;
    let hedge: NodeJS.Timeout | undefined;
    const fail = (error: unknown) => {
      settled = true;
      clearTimeout(hedge);
      if (sent > 1 && typeof error === 'object' && error !== null) fromHedge.add(error);
      if (mayHaveLanded) markMayHaveLanded(error);
      reject(error);
    };
    const send = () => {
      sent += 1;
      inFlight += 1;
      const copy = sent > 1;
      call().then(
        (value) => {
          if (settled) return;
          settled = true;
          clearTimeout(hedge);
          resolve(value);
        },
        (error: unknown) => {
          inFlight -= 1;
          if (settled) return;
          if (conditionalWrite) {
            if (sent > 1 && isConflict(error)) return fail(error);
            // The first copy, still in flight, may land too.
            mayHaveLanded ||= describeApiError(error).mayHaveLanded || (copy && inFlight > 0);
          }
          // A second copy that failed leaves only the first, stalled past the delay: the retries
          // go on now. A first copy that failed leaves the second, sent a moment ago: it may answer.
          if (copy || inFlight === 0) fail(error);
        },
      );
    };
    hedge = setTimeout(() => {
      hedge = undefined;
      if (!settled) send();
    }, afterMs);
    hedge.unref?.();
    send();
  });
}

/** Single-object reads under `policy`: each attempt hedged, then retried. */
const hedgedReads =
  (policy: RetryPolicy) =>
  <T>(request: string, call: () => Promise<T>): Promise<T> =>
    retrying(policy, request, () => hedged(call, policy.hedgeAfterMs));

/**
 * A patch under `policy`, retried. One conditional on a resourceVersion is hedged, and one that
 * conflicts after a retry or a second copy is read back: it landed when the object carries every
 * annotation the patch sets.
 */
const settledPatch =
  (policy: RetryPolicy) =>
  (request: string, patch: object, call: () => Promise<void>, read: () => Promise<Annotated>): Promise<void> =>
    isConditional(patch)
      ? retrying(
          policy,
          request,
          () => hedged(call, policy.hedgeAfterMs, true),
          settleByReadBack(read, (current) => (carriesAnnotations(current, patch) ? undefined : FAILED)),
          true,
        )
      : retrying(policy, request, call, undefined, true);

/** Wait before the next attempt: the server's Retry-After if given, else exponential back-off; capped. */
export function retryDelayMs(policy: RetryPolicy, failure: ApiFailure, attempt: number): number {
  if (failure.retryAfterSeconds !== undefined) return Math.min(policy.maxDelayMs, failure.retryAfterSeconds * 1000);
  const backOff = policy.baseDelayMs * 2 ** (attempt - 1) * (1 + policy.jitter * policy.random());
  return Math.min(policy.maxDelayMs, Math.round(backOff));
}

/**
 * Retries 429, 5xx and dropped connections. `settle` sees every error with whether an earlier
 * attempt was made; it may turn an error into a result (the request had landed). A write given up
 * on after an attempt that may have reached the server is thrown marked so (`mayHaveLanded`): that
 * attempt's request can still be carried out after the last answer.
 */
async function retrying<T>(
  policy: RetryPolicy,
  request: string,
  call: () => Promise<T>,
  settle?: (error: unknown, retried: boolean) => Promise<T | typeof FAILED>,
  write = false,
): Promise<T> {
  let mayHaveLanded = false;
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await call();
    } catch (error) {
      if (settle) {
        const settled = await settle(error, attempt > 1 || cameFromHedge(error));
        if (settled !== FAILED) return settled;
      }
      const failure = describeApiError(error);
      mayHaveLanded ||= write && failure.mayHaveLanded;
      if (attempt >= policy.attempts || !isRetryable(failure) || policy.signal?.aborted) {
        if (attempt > 1 && isRetryable(failure) && !policy.signal?.aborted) policy.onRetry?.({ request, failure, attempt });
        if (mayHaveLanded) markMayHaveLanded(error);
        throw error;
      }
      const delayMs = retryDelayMs(policy, failure, attempt);
      policy.onRetry?.({ request, failure, attempt, delayMs });
      await policy.sleep(delayMs, policy.signal);
      if (policy.signal?.aborted) {
        if (mayHaveLanded) markMayHaveLanded(error);
        throw error;
      }
    }
  }
}

const FAILED = Symbol('failed');

/**
 * The plain gateway with retries. Reads are repeated as they are (single-object ones hedged). Writes are repeated because
 * each is made idempotent:
 * - `mergePatchJob` without a resourceVersion gives the same result twice; `patchPodStatus` and
 *   `jsonPatchJob` carry preconditions, so a repeat after a lost answer fails and the caller
 *   re-reads the object to learn whether the first attempt landed;
 * - `mergePatchJob` or `patchJobStatus` with a resourceVersion (a claim) is hedged; one that
 *   conflicts after a retry or a second copy reads the Job: if it carries every annotation the
 *   patch sets, the earlier attempt or the other copy landed;
 * - `createEvent` sends the same object (same name) every attempt, so a 409 after a retry is done;
 * - `deletePod` and `evictPod` after a retry resolve when the pod is gone (404 is their earlier
 *   attempt's, done); a 404 on the first attempt is thrown, so the caller tells "already gone" from "deleted";
 * - `mergePatchCronJob` and `mergePatchJobSet` (always with a resourceVersion) are hedged and settled like a conditional Job patch.
 */
export function withRetries(plain: KubeGateway, options: Partial<RetryPolicy> = {}): KubeGateway {
  const policy: RetryPolicy = { ...DEFAULT_RETRY_POLICY, ...options };
  const retry = <T>(request: string, call: () => Promise<T>) => retrying(policy, request, call);
  const read = hedgedReads(policy);
  const patch = settledPatch(policy);
  const retryWrite = <T>(request: string, call: () => Promise<T>, settle?: (e: unknown, retried: boolean) => Promise<T | typeof FAILED>) =>
    retrying(policy, request, call, settle, true);
  // Settling a conditional write reads the object back through these retries too: a lost read
  // must not turn a write that landed into a conflict.
  const gateway: KubeGateway = {
    listNamespaceNames: (opts) => retry('listNamespaceNames', () => plain.listNamespaceNames(opts)),
    listPodRows: (opts) => retry(`listPodRows ${opts.namespace}`, () => plain.listPodRows(opts)),
    listAllPodRows: (opts) => retry('listAllPodRows', () => plain.listAllPodRows(opts)),
    readPod: (namespace, name) => read(`readPod ${namespace}/${name}`, () => plain.readPod(namespace, name)),
    listPods: (opts) => retry(`listPods ${opts.namespace}`, () => plain.listPods(opts)),
    listJobs: (opts) => retry(`listJobs ${opts.namespace ?? '*'}`, () => plain.listJobs(opts)),
    readJob: (namespace, name) => read(`readJob ${namespace}/${name}`, () => plain.readJob(namespace, name)),
    readNamespace: (name) => read(`readNamespace ${name}`, () => plain.readNamespace(name)),
    readConfigMap: (namespace, name) => read(`readConfigMap ${namespace}/${name}`, () => plain.readConfigMap(namespace, name)),
    patchPodStatus: (namespace, name, patch) =>
      retryWrite(`patchPodStatus ${namespace}/${name}`, () => plain.patchPodStatus(namespace, name, patch)),
    mergePatchJob: (namespace, name, body) =>
      patch(
        `mergePatchJob ${namespace}/${name}`,
        body,
        () => plain.mergePatchJob(namespace, name, body),
        () => gateway.readJob(namespace, name),
      ),
    patchJobStatus: (namespace, name, body) =>
      patch(
        `patchJobStatus ${namespace}/${name}`,
        body,
        () => plain.patchJobStatus(namespace, name, body),
        () => gateway.readJob(namespace, name),
      ),
    // A test operation that fails after a retry is left to the caller, which re-reads the Job.
    jsonPatchJob: (namespace, name, operations) =>
      retryWrite(`jsonPatchJob ${namespace}/${name}`, () => plain.jsonPatchJob(namespace, name, operations)),
    deletePod: (namespace, name, uid, resourceVersion, options) =>
      retryWrite(
        `deletePod ${namespace}/${name}`,
        () => plain.deletePod(namespace, name, uid, resourceVersion, options),
        // Only after a retry is a 404 this call's own earlier attempt; on the first it is the
        // caller's to judge (the pod was already gone).
        async (error, retried) => (retried && judgeWriteError('delete', error).landed ? undefined : FAILED),
      ),
    // Like a delete: after a retry, a 404 is the earlier attempt's (the pod is gone); a 409 is left
    // to the caller, which reads the pod back (the earlier attempt changed it: DisruptionTarget).
    evictPod: (namespace, name, uid, resourceVersion) =>
      retryWrite(
        `evictPod ${namespace}/${name}`,
        () => plain.evictPod(namespace, name, uid, resourceVersion),
        async (error, retried) => (retried && judgeWriteError('delete', error).landed ? undefined : FAILED),
      ),
    readServiceAccount: (namespace, name) =>
      read(`readServiceAccount ${namespace}/${name}`, () => plain.readServiceAccount(namespace, name)),
    readSecretMetadata: (namespace, name) =>
      read(`readSecretMetadata ${namespace}/${name}`, () => plain.readSecretMetadata(namespace, name)),
    createEvent: (namespace, event) =>
      retryWrite(
        `createEvent ${namespace}/${event.metadata?.name ?? ''}`,
        () => plain.createEvent(namespace, event),
        async (error, retried) => (retried && judgeWriteError('create', error).landed ? undefined : FAILED),
      ),
    readCronJob: (namespace, name) => read(`readCronJob ${namespace}/${name}`, () => plain.readCronJob(namespace, name)),
    mergePatchCronJob: (namespace, name, body) =>
      patch(
        `mergePatchCronJob ${namespace}/${name}`,
        body,
        () => plain.mergePatchCronJob(namespace, name, body),
        () => gateway.readCronJob(namespace, name),
      ),
    readJobSet: (namespace, name) => read(`readJobSet ${namespace}/${name}`, () => plain.readJobSet(namespace, name)),
    mergePatchJobSet: (namespace, name, body) =>
      patch(
        `mergePatchJobSet ${namespace}/${name}`,
        body,
        () => plain.mergePatchJobSet(namespace, name, body),
        () => gateway.readJobSet(namespace, name),
      ),
    // Always conditional on the resourceVersion: a retried patch that conflicts is left to the caller, which re-reads the pod.
    mergePatchPod: (namespace, name, patch) =>
      retryWrite(`mergePatchPod ${namespace}/${name}`, () => plain.mergePatchPod(namespace, name, patch)),
    lastServerDate: () => plain.lastServerDate(),
    readServerVersion: () => retry('readServerVersion', () => plain.readServerVersion()),
    serverDryRun: () => withRetries(plain.serverDryRun(), options),
  };
  return gateway;
}

/**
 * A conditional write that conflicts after a retry or a hedged copy may have met its own earlier
 * landing: the object is read back, and `landedAs` says what the write resolves to if the object
 * shows it landed (FAILED: it did not, or the read failed).
 */
function settleByReadBack<O, T>(read: () => Promise<O>, landedAs: (current: O) => T | typeof FAILED) {
  return async (error: unknown, retried: boolean): Promise<T | typeof FAILED> => {
    if (!retried || !isConflict(error)) return FAILED;
    const current = await read().catch(() => undefined);
    return current === undefined ? FAILED : landedAs(current);
  };
}

/** What a conditional patch is read back from. */
type Annotated = V1Job | V1CronJob | JobSetObject;

/**
 * The Lease calls with the same retries. A create is repeated as it is: after a lost answer its
 * repeat conflicts, which the elector reads as "someone wrote first" and re-reads the Lease on
 * its next attempt (leader/elector.ts). A replace (conditional on its resourceVersion) is hedged
 * like a conditional patch; one that conflicts after a retry or a second copy reads the Lease
 * back, and it landed when the record holds this write's holder and renewTime: a renewal whose
 * answer was lost is then a renewal, not a round lost against the renew deadline.
 */
export function withLeaseRetries(plain: LeaseGateway, options: Partial<RetryPolicy> = {}): LeaseGateway {
  const policy: RetryPolicy = { ...DEFAULT_RETRY_POLICY, ...options };
  const read = hedgedReads(policy);
  const readLease = (namespace: string, name: string) => read(`readLease ${namespace}/${name}`, () => plain.readLease(namespace, name));
  return {
    readLease,
    createLease: (namespace, name, spec) =>
      retrying(policy, `createLease ${namespace}/${name}`, () => plain.createLease(namespace, name, spec)),
    replaceLease: (namespace, name, resourceVersion, spec) =>
      retrying(
        policy,
        `replaceLease ${namespace}/${name}`,
        () => hedged(() => plain.replaceLease(namespace, name, resourceVersion, spec), policy.hedgeAfterMs, true),
        settleByReadBack(
          () => readLease(namespace, name),
          (current) => (current.spec && isWriteOf(current.spec, spec) ? current.metadata?.resourceVersion : FAILED),
        ),
      ),
  };
}

/** The record read back is the one `spec` wrote: its holder, at its renewTime. */
function isWriteOf(current: LeaseSpec, spec: LeaseSpec): boolean {
  const at = (time: string | null | undefined) => (time ? Date.parse(time) : NaN);
  return current.holderIdentity === spec.holderIdentity && at(current.renewTime) === at(spec.renewTime);
}
