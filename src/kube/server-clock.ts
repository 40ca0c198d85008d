// "Now" on the API server's clock (docs/clock.md): the Date header of its newest answer plus the
// local monotonic time elapsed since that answer arrived. Never the sweeper's wall clock.

/** The Date header of one answer, and how long ago (local monotonic ms) that answer arrived. */
export interface ServerDate {
  date: Date;
  ageMs: number;
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const IMF_FIXDATE = /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d{2}) ([A-Z][a-z]{2}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/;

/** Pure: an HTTP Date header in the IMF-fixdate form every HTTP server writes (RFC 9110 5.6.7); undefined otherwise. */
export function parseHttpDate(header: string | undefined): Date | undefined {
  const m = header === undefined ? null : IMF_FIXDATE.exec(header.trim());
  if (!m) return undefined;
  const month = MONTHS.indexOf(m[2]!);
  const [day, year, hour, minute, second] = [m[1], m[3], m[4], m[5], m[6]].map(Number) as [number, number, number, number, number];
  if (month < 0 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return undefined;
  const ms = Date.UTC(year, month, day, hour, minute, Math.min(second, 59));
  // Date.UTC rolls 31 Feb over into March: a day the month does not have is not a date.
  return new Date(ms).getUTCDate() === day ? new Date(ms) : undefined;
}

/**
 * Pure: the API server's time now, from the Date of an answer that arrived `ageMs` ago. Never
 * later than the server's real time: the header is truncated to the second and written before the
 * answer left the server, so a stuck time measured from it errs short, never long.
 * Undefined without such an answer, or when it arrived before this sweep began (`sweepAgeMs` ago):
 * each sweep measures on answers of its own.
 */
export function serverNow(seen: ServerDate | undefined, sweepAgeMs: number): Date | undefined {
  if (!seen || seen.ageMs > sweepAgeMs) return undefined;
  return new Date(seen.date.getTime() + Math.max(0, seen.ageMs));
}
