/** client-node gives `Date`s; raw JSON gives RFC 3339 strings. Accept both. */
export type Timestamp = Date | string | null | undefined;

/** A timestamp of an object as a Date; undefined when absent or not a time. */
export function toDate(value: Timestamp): Date | undefined {
  if (value === null || value === undefined || value === '') return undefined;
  const ms = value instanceof Date ? value.getTime() : Date.parse(value);
  return Number.isNaN(ms) ? undefined : new Date(ms);
}
