// The other side of src/kube/protobuf.ts, for the tests: a JSON object cut down to a schema's
// fields as the decoder returns them (`project`), and its encoding as the API server writes it
// (`encode`, `envelope`, `frame`: non-pointer strings and numbers written even when empty, the
// zero time as a negative varint), so that unit tests can feed real recorded pods to the decoder.
import type { Field, Schema } from '../../src/kube/protobuf.ts';

type Json = Record<string, unknown>;

/** What decoding a pod's protobuf with `schema` must give: the JSON object with only its fields, empty texts left out. */
export function project(json: Json, schema: Schema): Json {
  const out: Json = {};
  for (const field of Object.values(schema) as Field[]) {
    if (field.inline) {
      Object.assign(out, project(json, field.type as Schema));
      continue;
    }
    const value = json[field.name];
    if (value === undefined) continue;
    const projected = field.repeated ? (value as unknown[]).map((v) => one(v, field)) : one(value, field);
    if (projected !== undefined && !(field.repeated && (projected as unknown[]).length === 0)) out[field.name] = projected;
  }
  return out;
}

function one(value: unknown, field: Field): unknown {
  const { type } = field;
  if (type === 'string') return value === '' || value === null ? undefined : value;
  if (type === 'time') return value === null ? null : new Date(value as string).toISOString().replace('.000Z', 'Z');
  if (type === 'stringMap' || type === 'quantityMap') {
    const entries = Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, String(v)]);
    return entries.length === 0 ? undefined : Object.fromEntries(entries);
  }
  if (type === 'int' || type === 'bool') return value;
  return value === null ? undefined : project(value as Json, type);
}

const ZERO_TIME_SECONDS = -62135596800;

function varint(n: number): number[] {
  const out: number[] = [];
  // Two's complement over 64 bits for negatives, as Go writes an int64 (and a sign-extended int32).
  let v = BigInt.asUintN(64, BigInt(n));
  do {
    const b = Number(v & 0x7fn);
    v >>= 7n;
    out.push(v > 0n ? b | 0x80 : b);
  } while (v > 0n);
  return out;
}

const tag = (n: number, wire: number) => varint((n << 3) | wire);
const lengthDelimited = (n: number, bytes: number[]) => [...tag(n, 2), ...varint(bytes.length), ...bytes];
const text = (s: string) => [...Buffer.from(s, 'utf8')];

/** `json` encoded with `schema`'s fields (the rest of it left out, as if the server had more). */
export function encode(json: Json, schema: Schema): number[] {
  const out: number[] = [];
  for (const [number, field] of Object.entries(schema) as [string, Field][]) {
    const n = Number(number);
    if (field.inline) {
      out.push(...lengthDelimited(n, encode(json, field.type as Schema)));
      continue;
    }
    const value = json[field.name];
    if (value === undefined) continue;
    for (const v of field.repeated ? (value as unknown[]) : [value]) out.push(...encodeOne(n, v, field));
  }
  return out;
}

function encodeOne(n: number, value: unknown, field: Field): number[] {
  const { type } = field;
  if (type === 'int') return [...tag(n, 0), ...varint(value as number)];
  if (type === 'bool') return [...tag(n, 0), value ? 1 : 0];
  if (type === 'string') return lengthDelimited(n, text((value as string | null) ?? ''));
  if (type === 'time') {
    const seconds = value === null ? ZERO_TIME_SECONDS : Math.floor(new Date(value as string).getTime() / 1000);
    return lengthDelimited(n, [...tag(1, 0), ...varint(seconds), ...tag(2, 0), 0]);
  }
  if (type === 'stringMap' || type === 'quantityMap') {
    const out: number[] = [];
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      const encoded = type === 'quantityMap' ? lengthDelimited(1, text(String(v))) : text(String(v));
      out.push(...lengthDelimited(n, [...lengthDelimited(1, text(k)), ...lengthDelimited(2, encoded)]));
    }
    return out;
  }
  return lengthDelimited(n, value === null ? [] : encode(value as Json, type));
}

/** An object in the API server's envelope (`k8s\0`, then runtime.Unknown). */
export function envelope(kind: string, raw: number[]): Buffer {
  const typeMeta = [...lengthDelimited(1, text('v1')), ...lengthDelimited(2, text(kind))];
  return Buffer.from([
    0x6b,
    0x38,
    0x73,
    0x00,
    ...lengthDelimited(1, typeMeta),
    ...lengthDelimited(2, raw),
    ...lengthDelimited(3, []),
    ...lengthDelimited(4, []),
  ]);
}

/** A list of enveloped items, as one page of a LIST answers. */
export function listOf(kind: string, items: number[][], meta: { resourceVersion?: string; continue?: string } = {}): Buffer {
  const listMeta = [
    ...lengthDelimited(1, []),
    ...lengthDelimited(2, text(meta.resourceVersion ?? '')),
    ...lengthDelimited(3, text(meta.continue ?? '')),
  ];
  return envelope(kind, [...lengthDelimited(1, listMeta), ...items.flatMap((item) => lengthDelimited(2, item))]);
}

/** A metav1.Status as the API server encodes it. */
export function statusBytes(status: { message: string; reason: string; code: number }): number[] {
  return [
    ...lengthDelimited(1, []),
    ...lengthDelimited(2, text('Failure')),
    ...lengthDelimited(3, text(status.message)),
    ...lengthDelimited(4, text(status.reason)),
    ...tag(6, 0),
    ...varint(status.code),
  ];
}

/** One watch frame: its 4-byte length, then a WatchEvent whose object is the enveloped `raw`. */
export function frame(type: string, kind: string, raw: number[]): Buffer {
  const event = [...lengthDelimited(1, text(type)), ...lengthDelimited(2, lengthDelimited(1, [...envelope(kind, raw)]))];
  const length = Buffer.alloc(4);
  length.writeUInt32BE(event.length);
  return Buffer.concat([length, Buffer.from(event)]);
}
