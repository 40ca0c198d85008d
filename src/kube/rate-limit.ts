// The client-side request rate limit (client-go's token bucket behind `rest.Config` QPS/Burst,
// `--kube-api-qps`/`--kube-api-burst`): every request takes a token; tokens come back at `qps` a
// second up to `burst`. Waiters are served in order.

export interface RateLimiter {
  /** Resolves when the request may go; rejects with the signal's reason if it aborts first. */
  take(signal?: AbortSignal): Promise<void>;
}

export const DEFAULT_KUBE_API_QPS = 50;
export const DEFAULT_KUBE_API_BURST = 100;

/** `qps` ≤ 0: no limit. `monotonicMs` and `setTimer` are passed in so a test can drive time. */
export function tokenBucket(
  qps: number,
  burst: number,
  monotonicMs: () => number = () => performance.now(),
  setTimer: (fn: () => void, ms: number) => { cancel(): void } = (fn, ms) => {
    const t = setTimeout(fn, ms);
    return { cancel: () => clearTimeout(t) };
  },
): RateLimiter {
  if (!(qps > 0)) return { take: () => Promise.resolve() };
  const capacity = Math.max(1, Math.floor(burst));
  let tokens = capacity;
  let filledAtMs = monotonicMs();
  const waiting: { go: () => void }[] = [];
  let timer: { cancel(): void } | undefined;
  const refill = () => {
    const now = monotonicMs();
    tokens = Math.min(capacity, tokens + ((now - filledAtMs) * qps) / 1000);
    filledAtMs = now;
  };
  const serve = () => {
    timer = undefined;
    refill();
    while (waiting.length > 0 && tokens >= 1) {
      tokens -= 1;
      waiting.shift()!.go();
    }
    if (waiting.length > 0) timer = setTimer(serve, Math.ceil(((1 - tokens) * 1000) / qps));
  };
  return {
    take(signal) {
      if (signal?.aborted) return Promise.reject(signal.reason as Error);
      refill();
      if (waiting.length === 0 && tokens >= 1) {
        tokens -= 1;
        return Promise.resolve();
      }
      return new Promise<void>((resolve, reject) => {
        const entry = {
          go: () => {
            signal?.removeEventListener('abort', abort);
            resolve();
          },
        };
        const abort = () => {
          const i = waiting.indexOf(entry);
          if (i >= 0) waiting.splice(i, 1);
          reject(signal?.reason as Error);
        };
        signal?.addEventListener('abort', abort, { once: true });
        waiting.push(entry);
        if (!timer) timer = setTimer(serve, Math.ceil(((1 - tokens) * 1000) / qps));
      });
    },
  };
}
