// The Kubernetes protobuf encoding, read only as far as a schema asks (docs/performance.md "The
// decisive Job at start-up"): every field the schema does not name (managedFields, env, probes…)
// is skipped by its length, never decoded. The API server wraps each object in an envelope:
// the magic `k8s\0`, then a runtime.Unknown (typeMeta 1, raw 2); a watch sends frames of a 4-byte
// big-endian length, each a metav1.WatchEvent (type 1, object 2 whose raw 1 is an envelope).

/** The media type of the API server's protobuf answers (a watch adds `;stream=watch`). */
export const PROTOBUF = 'application/vnd.kubernetes.protobuf';

/** A field's value: text, a number, a flag, a metav1.Time (as its JSON text), a map, or a message. */
export type FieldType = 'string' | 'int' | 'bool' | 'time' | 'stringMap' | 'quantityMap' | Schema;

export interface Field {
  name: string;
  type: FieldType;
  repeated?: boolean;
  /** Its fields are the enclosing object's (a Go struct embedded inline in JSON, e.g. a volume's source). */
  inline?: boolean;
}

/** Field number → what it is; the fields a schema leaves out are skipped. */
export type Schema = { readonly [number: number]: Field };

const MAGIC = [0x6b, 0x38, 0x73, 0x00];
/** time.Time's zero (0001-01-01T00:00:00Z), which JSON writes as null. */
const ZERO_TIME_SECONDS = -62135596800;
const WIRE_VARINT = 0;
const WIRE_64 = 1;
const WIRE_BYTES = 2;
const WIRE_32 = 5;

export class ProtobufError extends Error {
  constructor(message: string) {
    super(`protobuf: ${message}`);
    this.name = 'ProtobufError';
  }
}

/** A cursor over one message's bytes. */
class Reader {
  constructor(
    readonly buf: Buffer,
    public pos: number,
    readonly end: number,
  ) {}

  /** A varint as a signed 64-bit number (exact within 2^53). */
  varint(): number {
    let lo = 0;
    let hi = 0;
    let shift = 0;
    for (let i = 0; i < 10; i += 1) {
      if (this.pos >= this.end) throw new ProtobufError('truncated varint');
      const b = this.buf[this.pos++]!;
      if (shift < 28) lo |= (b & 0x7f) << shift;
      else if (shift === 28) {
        lo |= (b & 0x0f) << 28;
        hi |= (b & 0x7f) >> 4;
      } else hi |= (b & 0x7f) << (shift - 32);
      if (b < 0x80) return (hi | 0) * 2 ** 32 + (lo >>> 0);
      shift += 7;
    }
    throw new ProtobufError('varint longer than 10 bytes');
  }

  /** The bounds of a length-delimited field's bytes, moving past them. */
  bytes(): [number, number] {
    const length = this.varint();
    const start = this.pos;
    if (length < 0 || start + length > this.end) throw new ProtobufError('a length runs past its message');
    this.pos = start + length;
    return [start, this.pos];
  }

  skip(wire: number): void {
    if (wire === WIRE_VARINT) this.varint();
    else if (wire === WIRE_BYTES) this.bytes();
    else if (wire === WIRE_64) this.pos += 8;
    else if (wire === WIRE_32) this.pos += 4;
    else throw new ProtobufError(`unknown wire type ${wire}`);
    if (this.pos > this.end) throw new ProtobufError('a field runs past its message');
  }
}

/** The message in `buf[start, end)` as a plain object of the schema's fields (empty texts left out, as JSON leaves them). */
export function decodeMessage(buf: Buffer, schema: Schema, start = 0, end = buf.length): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const r = new Reader(buf, start, end);
  while (r.pos < r.end) {
    const tag = r.varint();
    const wire = tag & 7;
    const field = schema[tag >>> 3];
    if (!field) {
      r.skip(wire);
      continue;
    }
    const value = fieldValue(r, wire, field);
    if (value === undefined) continue;
    if (field.repeated) ((out[field.name] ??= []) as unknown[]).push(value);
    else if (field.inline) Object.assign(out, value);
    else if (field.type === 'stringMap' || field.type === 'quantityMap') {
      const [k, v] = value as [string, string];
      ((out[field.name] ??= {}) as Record<string, string>)[k] = v;
    } else out[field.name] = value;
  }
  return out;
}

function fieldValue(r: Reader, wire: number, field: Field): unknown {
  const { type } = field;
  if (type === 'int' || type === 'bool') {
    if (wire !== WIRE_VARINT) throw new ProtobufError(`${field.name}: expected a varint`);
    const n = r.varint();
    return type === 'bool' ? n !== 0 : n;
  }
  if (wire !== WIRE_BYTES) throw new ProtobufError(`${field.name}: expected a length-delimited field`);
  const [start, end] = r.bytes();
  if (type === 'string') return start === end ? undefined : r.buf.toString('utf8', start, end);
  if (type === 'time') return timeText(r.buf, start, end);
  if (type === 'stringMap' || type === 'quantityMap') return mapEntry(r.buf, start, end, type === 'quantityMap');
  return decodeMessage(r.buf, type, start, end);
}

/** The texts of recent times: a list of pods repeats the same seconds (their conditions, their starts). */
const TIME_TEXTS = new Map<number, string>();
const TIME_TEXTS_MAX = 4096;

/** A metav1.Time (seconds 1; nanos 2, which it never writes) as JSON writes it (RFC 3339, whole seconds, UTC); null for the zero time. */
function timeText(buf: Buffer, start: number, end: number): string | null {
  const r = new Reader(buf, start, end);
  let seconds = 0;
  while (r.pos < r.end) {
    const tag = r.varint();
    if (tag === ((1 << 3) | WIRE_VARINT)) seconds = r.varint();
    else r.skip(tag & 7);
  }
  if (seconds === ZERO_TIME_SECONDS) return null;
  let text = TIME_TEXTS.get(seconds);
  if (text === undefined) {
    if (TIME_TEXTS.size >= TIME_TEXTS_MAX) TIME_TEXTS.clear();
    text = new Date(seconds * 1000).toISOString().replace('.000Z', 'Z');
    TIME_TEXTS.set(seconds, text);
  }
  return text;
}

const STRING_ENTRY: Schema = { 1: { name: 'key', type: 'string' }, 2: { name: 'value', type: 'string' } };
/** A resource.Quantity is its text (field 1). */
const QUANTITY_ENTRY: Schema = { 1: { name: 'key', type: 'string' }, 2: { name: 'value', type: { 1: { name: 'text', type: 'string' } } } };

function mapEntry(buf: Buffer, start: number, end: number, quantity: boolean): [string, string] {
  const entry = decodeMessage(buf, quantity ? QUANTITY_ENTRY : STRING_ENTRY, start, end);
  const value = quantity ? (entry.value as { text?: string } | undefined)?.text : (entry.value as string | undefined);
  return [(entry.key as string | undefined) ?? '', value ?? ''];
}

const TYPE_META: Schema = { 1: { name: 'apiVersion', type: 'string' }, 2: { name: 'kind', type: 'string' } };

/** An enveloped object's kind and the bounds of its own bytes. */
export function unwrap(buf: Buffer, start = 0, end = buf.length): { kind: string; start: number; end: number } {
  if (end - start < MAGIC.length || MAGIC.some((b, i) => buf[start + i] !== b)) throw new ProtobufError('no k8s envelope');
  let kind = '';
  let raw: [number, number] = [start + MAGIC.length, start + MAGIC.length];
  eachBytesField(buf, start + MAGIC.length, end, (n, s, e) => {
    if (n === 1) kind = ((decodeMessage(buf, TYPE_META, s, e).kind as string | undefined) ?? '').trim();
    else if (n === 2) raw = [s, e];
  });
  return { kind, start: raw[0], end: raw[1] };
}

/** Each length-delimited field of a message, by number and bounds; the other fields skipped. */
function eachBytesField(buf: Buffer, start: number, end: number, onField: (n: number, start: number, end: number) => void): void {
  const r = new Reader(buf, start, end);
  while (r.pos < r.end) {
    const tag = r.varint();
    if ((tag & 7) !== WIRE_BYTES) {
      r.skip(tag & 7);
      continue;
    }
    const [s, e] = r.bytes();
    onField(tag >>> 3, s, e);
  }
}

const STATUS: Schema = {
  2: { name: 'status', type: 'string' },
  3: { name: 'message', type: 'string' },
  4: { name: 'reason', type: 'string' },
  6: { name: 'code', type: 'int' },
};

/** A metav1.Status (an error answer or an ERROR event) as its JSON object. */
export function decodeStatus(
  buf: Buffer,
  start = 0,
  end = buf.length,
): { kind: 'Status'; status?: string; message?: string; reason?: string; code?: number } {
  return { kind: 'Status', ...decodeMessage(buf, STATUS, start, end) };
}

const LIST_META: Schema = { 2: { name: 'resourceVersion', type: 'string' }, 3: { name: 'continue', type: 'string' } };

/** A list's continue token and resourceVersion. */
export interface ListMeta {
  continue?: string;
  resourceVersion?: string;
}

/**
 * An enveloped list: its continue token and resourceVersion at once, its items (each by `item`)
 * decoded one at a time as they are iterated, so that each is reduced before the next is built.
 */
export function decodeList<T>(buf: Buffer, item: Schema): { items: Iterable<T>; count: number; metadata: ListMeta } {
  const list = unwrap(buf);
  let metadata: ListMeta = {};
  const ranges: number[] = [];
  eachBytesField(buf, list.start, list.end, (n, s, e) => {
    if (n === 1) metadata = decodeMessage(buf, LIST_META, s, e);
    else if (n === 2) ranges.push(s, e);
  });
  function* items(): Generator<T> {
    for (let i = 0; i < ranges.length; i += 2) yield decodeMessage(buf, item, ranges[i]!, ranges[i + 1]!) as T;
  }
  return { items: items(), count: ranges.length / 2, metadata };
}

/** One watch frame (without its length) as the JSON watch's event: `{type, object}`, an ERROR's object a Status. */
export function decodeWatchEvent(frame: Buffer, object: Schema): { type?: string; object?: unknown } {
  let type: string | undefined;
  let raw: [number, number] | undefined;
  eachBytesField(frame, 0, frame.length, (n, s, e) => {
    if (n === 1) type = frame.toString('utf8', s, e);
    // The object is a RawExtension: its raw (1) holds the enveloped object.
    else if (n === 2) eachBytesField(frame, s, e, (m, rs, re) => void (m === 1 && (raw = [rs, re])));
  });
  if (!raw) return { type };
  const [rawStart, rawEnd] = raw;
  const inner = unwrap(frame, rawStart, rawEnd);
  return {
    type,
    object: inner.kind === 'Status' ? decodeStatus(frame, inner.start, inner.end) : decodeMessage(frame, object, inner.start, inner.end),
  };
}

/** Splits a byte stream into length-prefixed frames as they complete; the rest waits for more. */
export class FrameSplitter {
  private pending: Buffer = Buffer.alloc(0);

  push(chunk: Buffer, onFrame: (frame: Buffer) => void): void {
    let buf = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    while (buf.length >= 4) {
      const length = buf.readUInt32BE(0);
      if (buf.length < 4 + length) break;
      onFrame(buf.subarray(4, 4 + length));
      buf = buf.subarray(4 + length);
    }
    this.pending = buf;
  }
}
