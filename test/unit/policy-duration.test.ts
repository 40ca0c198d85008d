import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DurationError, formatDuration, parseGoDuration, tryParseGoDuration } from '../../src/policy/duration.ts';

describe('parseGoDuration', () => {
  const valid: Array<[string, number]> = [
    ['0', 0],
    ['0s', 0],
    ['-0s', 0],
    ['300ms', 0.3],
    ['30s', 30],
    ['10m', 600],
    ['1h', 3600],
    ['1h30m', 5400],
    ['1.5h', 5400],
    ['2h45m30s', 9930],
    ['+5s', 5],
    ['.5s', 0.5],
    ['5.s', 5],
    ['1m0.5s', 60.5],
    ['1500us', 0.0015],
    ['1500µs', 0.0015],
    ['1500μs', 0.0015],
    ['250ns', 0.00000025],
    ['1h1h', 7200],
    ['100000h', 360000000],
  ];
  for (const [text, seconds] of valid) {
    it(`parses ${JSON.stringify(text)} as ${seconds}s`, () => {
      assert.equal(parseGoDuration(text), seconds);
    });
  }

  const invalid: Array<[string, RegExp]> = [
    ['', /duration is empty/],
    ['-5m', /duration "-5m" is negative/],
    ['-1h30m', /is negative/],
    ['30', /missing unit in duration "30"/],
    ['1h30', /missing unit in duration "1h30"/],
    ['1d', /unknown unit "d" in duration "1d".*days are not supported/],
    ['5x', /unknown unit "x" in duration "5x"/],
    ['1H', /unknown unit "H"/],
    ['1h 30m', /unknown unit "h "/],
    ['h', /invalid duration "h"/],
    ['.s', /invalid duration ".s"/],
    ['+', /invalid duration "\+"/],
    ['-', /invalid duration "-"/],
    ['1.5.5s', /missing unit/],
    [' 5s', /invalid duration/],
    ['99999999999h', /too large/],
  ];
  for (const [text, message] of invalid) {
    it(`rejects ${JSON.stringify(text)}`, () => {
      assert.throws(
        () => parseGoDuration(text),
        (error: unknown) => error instanceof DurationError && message.test(error.message),
      );
      const result = tryParseGoDuration(text);
      assert.equal(result.ok, false);
    });
  }
});

describe('formatDuration', () => {
  const table: Array<[number, string]> = [
    [0, '0s'],
    [45, '45s'],
    [60, '1m'],
    [120, '2m'],
    [5400, '1h30m'],
    [3600, '1h'],
    [3605, '1h5s'],
    [9930, '2h45m30s'],
    [1.5, '1.5s'],
    [0.3, '300ms'],
    [0.0015, '1.5ms'],
    [0.000002, '2µs'],
    [0.00000025, '250ns'],
    [-90, '-1m30s'],
    [360000000, '100000h'],
  ];
  for (const [seconds, text] of table) {
    it(`formats ${seconds}s as ${text}`, () => assert.equal(formatDuration(seconds), text));
  }

  it('round-trips through parseGoDuration', () => {
    for (const seconds of [0, 0.001, 0.3, 1, 59.999, 61, 3599, 3600.5, 86400, 123456.789]) {
      assert.equal(parseGoDuration(formatDuration(seconds)), seconds);
    }
  });

  it('rejects non-finite numbers', () => {
    assert.throws(() => formatDuration(Number.NaN), RangeError);
    assert.throws(() => formatDuration(Infinity), RangeError);
  });
});
