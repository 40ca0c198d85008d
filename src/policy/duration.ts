// Go-style durations (time.ParseDuration syntax), in seconds.

const UNIT_NANOS: Record<string, number> = {
  ns: 1,
  us: 1e3,
  µs: 1e3, // U+00B5
  μs: 1e3, // U+03BC
  ms: 1e6,
  s: 1e9,
  m: 60e9,
  h: 3600e9,
};

const VALID_UNITS = '"ns", "us", "ms", "s", "m", "h"';
/** Go's maximum Duration, rounded down to whole hours. */
const MAX_SECONDS = 2562047 * 3600;
const EXAMPLES = 'e.g. "30s", "10m", "1h30m"';

export class DurationError extends Error {
  override name = 'DurationError';
}

/** Parses a Go duration (`300ms`, `1h30m`, `1.5h`) into seconds. Throws DurationError. */
export function parseGoDuration(text: string): number {
  const result = tryParseGoDuration(text);
  if (!result.ok) throw new DurationError(result.error);
  return result.seconds;
}

export function tryParseGoDuration(text: string): { ok: true; seconds: number } | { ok: false; error: string } {
  const fail = (error: string) => ({ ok: false as const, error });
  const quoted = JSON.stringify(text);
  if (text === '') return fail(`duration is empty; use a Go duration (${EXAMPLES})`);
  if (text[0] === '-') {
    const magnitude = parsePositive(text.slice(1), quoted);
    return magnitude.ok && magnitude.seconds > 0 ? fail(`duration ${quoted} is negative`) : magnitude;
  }
  return parsePositive(text[0] === '+' ? text.slice(1) : text, quoted);
}

function parsePositive(text: string, quoted: string): { ok: true; seconds: number } | { ok: false; error: string } {
  const fail = (error: string) => ({ ok: false as const, error });
  if (text === '0') return { ok: true, seconds: 0 };
  if (text === '') return fail(`invalid duration ${quoted} (${EXAMPLES})`);
  const element = /^(\d*)(?:\.(\d*))?([^\d.]*)/;
  let nanos = 0;
  let rest = text;
  while (rest !== '') {
    const m = element.exec(rest);
    const [all, whole = '', frac = '', unit = ''] = m ?? [];
    if (!m || (whole === '' && frac === '')) return fail(`invalid duration ${quoted} (${EXAMPLES})`);
    if (unit === '') {
      return fail(`missing unit in duration ${quoted}; valid units are ${VALID_UNITS} (${EXAMPLES})`);
    }
    const unitNanos = UNIT_NANOS[unit];
    if (unitNanos === undefined) {
      const hint = unit === 'd' ? '; days are not supported, use hours (e.g. "24h")' : '';
      return fail(`unknown unit ${JSON.stringify(unit)} in duration ${quoted}; valid units are ${VALID_UNITS}${hint}`);
    }
    nanos += Number(`${whole || '0'}.${frac || '0'}`) * unitNanos;
    rest = rest.slice(all!.length);
  }
  const seconds = Math.round(nanos) / 1e9;
  if (!Number.isFinite(seconds) || seconds > MAX_SECONDS) return fail(`duration ${quoted} is too large`);
  return { ok: true, seconds };
}

/** Formats seconds Go-style without zero components: `1h30m`, `45s`, `1h5s`, `1.5s`, `300ms`, `0s`. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) throw new RangeError(`cannot format ${seconds} as a duration`);
  if (seconds < 0) return `-${formatDuration(-seconds)}`;
  const nanos = Math.round(seconds * 1e9);
  if (nanos === 0) return '0s';
  if (nanos < 1e3) return `${nanos}ns`;
  if (nanos < 1e6) return `${decimal(nanos, 3)}µs`;
  if (nanos < 1e9) return `${decimal(nanos, 6)}ms`;
  const hours = Math.floor(nanos / 3600e9);
  const minutes = Math.floor((nanos % 3600e9) / 60e9);
  const secNanos = nanos % 60e9;
  return (hours > 0 ? `${hours}h` : '') + (minutes > 0 ? `${minutes}m` : '') + (secNanos > 0 ? `${decimal(secNanos, 9)}s` : '');
}

/** `value / 10^exponent` without floating-point noise. */
function decimal(value: number, exponent: number): string {
  const unit = 10 ** exponent;
  const whole = Math.floor(value / unit);
  const frac = value % unit;
  if (frac === 0) return String(whole);
  return `${whole}.${String(frac).padStart(exponent, '0').replace(/0+$/, '')}`;
}
