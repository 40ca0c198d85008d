// The API server's clock for the timers (docs/clock.md, "Event-driven mode" in docs/how-it-works.md).
// Each answer's Date header, minus the local monotonic time it arrived at, is a lower bound of the
// offset between the server's clock and ours: the header is truncated to the second and written
// before the answer left. The largest of recent bounds is the closest, and still never ahead of
// the server, so a timer set from it fires at the due time or just after, never before.
import type { ServerDate } from '../kube/server-clock.ts';

/** Bounds older than this are dropped: the two clocks drift apart slowly (NTP slews the server's). */
export const OFFSET_WINDOW_MS = 10 * 60_000;
const MAX_SAMPLES = 64;

export class ServerClock {
  private samples: { offsetMs: number; atMs: number }[] = [];

  /** One answer's Date, as the gateway reports it (its age at `monoNowMs`). */
  note(seen: ServerDate | undefined, monoNowMs: number): void {
    if (seen) this.noteAt(seen.date, monoNowMs - seen.ageMs);
  }

  /** One answer's Date and the local monotonic time it arrived at (every answer of the HTTP layer, watches included). */
  noteAt(date: Date, arrivedAtMs: number): void {
    const offsetMs = date.getTime() - arrivedAtMs;
    const last = this.samples.at(-1);
    if (last && last.atMs === arrivedAtMs && last.offsetMs === offsetMs) return;
    this.samples.push({ offsetMs, atMs: arrivedAtMs });
    if (this.samples.length > MAX_SAMPLES) this.samples.shift();
  }

  /** Local monotonic ms since the newest answer; Infinity before any. */
  ageMs(monoNowMs: number): number {
    const last = this.samples.at(-1);
    return last ? monoNowMs - last.atMs : Infinity;
  }

  /** The newest bound is kept however old: a timer set from it is late by the drift, never lost (the loop calibrates a stale clock). */
  private offset(monoNowMs: number): number | undefined {
    const newest = this.samples.at(-1);
    this.samples = this.samples.filter((s) => s === newest || monoNowMs - s.atMs <= OFFSET_WINDOW_MS);
    let best: number | undefined;
    for (const s of this.samples) if (best === undefined || s.offsetMs > best) best = s.offsetMs;
    return best;
  }

  /** The server's time at local monotonic `monoNowMs`, or undefined before any answer. */
  serverNowMs(monoNowMs: number): number | undefined {
    const offset = this.offset(monoNowMs);
    return offset === undefined ? undefined : monoNowMs + offset;
  }

  /** The local monotonic time at which the server's clock reaches `serverMs`. */
  monotonicAt(serverMs: number, monoNowMs: number): number | undefined {
    const offset = this.offset(monoNowMs);
    return offset === undefined ? undefined : serverMs - offset;
  }
}
