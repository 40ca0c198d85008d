// One collection listed, then watched from the list's resourceVersion, for as long as the signal
// lives (client-go's reflector): the pods and the policy ConfigMap of `run --watch` both use it.
// - The next page is asked for as soon as a page is in, and read while it is handled.
// - A page that fails is asked again with the same continue token, so a fault on page 250 costs
//   one page: first as the gateway retries a read (250 ms doubling, the server's Retry-After
//   honoured), then with the back-off of a failed watch; a continue token that expired (410)
//   starts the list over.
// - A watch that ends (the server's timeout) or drops is resumed from the last resourceVersion seen,
//   bookmarks included; one that expired (410 Gone) lists again.
// - The back-off between failed watches resets once a watch is accepted; one that stayed up a
//   second or more is resumed at once when it drops (only a watch failing quickly backs off).
import { describeApiError, isRetryable } from '../kube/errors.ts';
import { DEFAULT_RETRY_POLICY, retryDelayMs } from '../kube/retrying.ts';
import { WatchExpiredError, type Collection, type ListPage, type WatchEvent, type WatchGateway } from '../kube/watch.ts';

export type RestartReason = 'timeout' | 'dropped' | 'expired';

export interface ReflectorHandler<T> {
  /** A list pass begins: every object it holds follows through `listed`, then `listEnded`. */
  listStarted(): void;
  listed(object: T): void;
  /** Every page of the pass is in: what it did not hold is gone. */
  listEnded(): void;
  event(type: 'ADDED' | 'MODIFIED' | 'DELETED', object: T): void;
}

export interface ReflectorOptions {
  pageSize?: number;
  /** Seconds after which the API server ends one watch request (then resumed); jittered up to +20%. */
  watchTimeoutSeconds?: number;
  random?: () => number;
  sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  /** Local monotonic milliseconds (default: performance.now). */
  monotonicMs?: () => number;
  onRestart?: (scope: string, reason: RestartReason, error?: string) => void;
  /** The first list pass is in. */
  onSynced?: () => void;
  /** Each list pass that starts (the first, and one after each 410). */
  onList?: () => void;
  /** A watch was accepted (true) or ended (false). */
  onConnected?: (connected: boolean) => void;
  /** Each watch request: the resourceVersion it resumes from. */
  onWatch?: (resourceVersion: string) => void;
}

/** Back-off between failures: 0.5 s doubling to 30 s, jittered. */
export function failureDelayMs(failures: number, random: () => number): number {
  return Math.min(30_000, 500 * 2 ** Math.max(0, failures - 1)) * (1 + 0.2 * random());
}

/** A watch accepted at least this long before it dropped is resumed at once, without a back-off. */
export const RESUME_AT_ONCE_AFTER_MS = 1_000;

/** No byte for this long on a watch (bookmarks come about once a minute) means a dead connection. */
const IDLE_LIMIT_MS = 150_000;

export async function reflect<T>(
  gateway: WatchGateway,
  collection: Collection,
  handler: ReflectorHandler<T>,
  options: ReflectorOptions,
  signal: AbortSignal,
): Promise<void> {
  const random = options.random ?? Math.random;
  const monotonicMs = options.monotonicMs ?? (() => performance.now());
  const scope = collection.what;
  let resourceVersion: string | undefined;
  let failures = 0;
  let synced = false;
  const backOff = async (error: unknown) => {
    failures += 1;
    options.onRestart?.(scope, 'dropped', describeApiError(error).message);
    await options.sleep(failureDelayMs(failures, random), signal);
  };
  while (!signal.aborted) {
    if (resourceVersion === undefined) {
      const listed = await listAll(gateway, collection, handler, options, signal, backOff);
      if (listed === undefined) break;
      resourceVersion = listed;
      if (!synced) options.onSynced?.();
      synced = true;
    }
    const timeoutSeconds = Math.round((options.watchTimeoutSeconds ?? 300) * (1 + 0.2 * random()));
    let accepted = false;
    let acceptedAtMs = 0;
    try {
      options.onWatch?.(resourceVersion);
      await gateway.watch<T>(
        collection,
        {
          resourceVersion,
          timeoutSeconds,
          idleTimeoutMs: Math.min((timeoutSeconds + 30) * 1000, IDLE_LIMIT_MS),
          signal,
          onAccepted: () => {
            accepted = true;
            acceptedAtMs = monotonicMs();
            failures = 0;
            options.onConnected?.(true);
          },
        },
        (e: WatchEvent<T>) => {
          resourceVersion = e.resourceVersion || resourceVersion;
          if (e.type !== 'BOOKMARK') handler.event(e.type, e.object);
        },
      );
      if (accepted) options.onConnected?.(false);
      if (!signal.aborted) options.onRestart?.(scope, 'timeout');
    } catch (error) {
      if (accepted) options.onConnected?.(false);
      if (signal.aborted) break;
      if (error instanceof WatchExpiredError || describeApiError(error).status === 410) {
        options.onRestart?.(scope, 'expired', (error as Error).message);
        resourceVersion = undefined;
        continue;
      }
      if (accepted && monotonicMs() - acceptedAtMs >= RESUME_AT_ONCE_AFTER_MS) {
        options.onRestart?.(scope, 'dropped', describeApiError(error).message);
        continue;
      }
      await backOff(error);
    }
  }
}

/** One full list pass; a failed page is asked again from its continue token. Undefined when stopped. */
async function listAll<T>(
  gateway: WatchGateway,
  collection: Collection,
  handler: ReflectorHandler<T>,
  options: ReflectorOptions,
  signal: AbortSignal,
  backOff: (error: unknown) => Promise<void>,
): Promise<string | undefined> {
  for (;;) {
    options.onList?.();
    handler.listStarted();
    let continueToken: string | undefined;
    let resourceVersion: string | undefined;
    let expired = false;
    let attempt = 0;
    // The next page is asked for before this one is handled: the API server writes it meanwhile.
    let asked: Promise<ListPage<T>> | undefined;
    const ask = (token: string | undefined) =>
      gateway.list<T>(collection, { limit: options.pageSize ?? 500, continueToken: token, signal });
    do {
      if (signal.aborted) return undefined;
      try {
        attempt += 1;
        const page = await (asked ?? ask(continueToken));
        asked = undefined;
        attempt = 0;
        resourceVersion ??= page.resourceVersion;
        if (page.continueToken !== undefined) {
          asked = ask(page.continueToken);
          // Its failure is met when it is awaited, as the next page's.
          asked.catch(() => undefined);
        }
        for (const item of page.items) handler.listed(item);
        continueToken = page.continueToken;
      } catch (error) {
        asked = undefined;
        if (signal.aborted) return undefined;
        const failure = describeApiError(error);
        if (continueToken !== undefined && failure.status === 410) {
          options.onRestart?.(scope(collection), 'expired', (error as Error).message);
          expired = true;
          break;
        }
        if (isRetryable(failure) && attempt < DEFAULT_RETRY_POLICY.attempts) {
          options.onRestart?.(scope(collection), 'dropped', failure.message);
          await options.sleep(retryDelayMs({ ...DEFAULT_RETRY_POLICY, random: options.random ?? Math.random }, failure, attempt), signal);
          continue;
        }
        attempt = 0;
        await backOff(error);
      }
    } while (continueToken !== undefined || resourceVersion === undefined);
    if (expired) continue;
    handler.listEnded();
    return resourceVersion;
  }
}

const scope = (c: Collection) => c.what;
