// Did this write land, is this object gone? The one place a write's answer, a read's 404 and a
// conditional patch read back are judged, for every call the sweeper makes: the retry layer asks
// here too. (A confirm callback only reads back the one field its write is known by.)
import type { V1CronJob, V1Job } from '@kubernetes/client-node';
import { describeApiError, type ApiFailure } from './errors.ts';

/**
 * - `create`: an object with a fixed name (Events). 409 AlreadyExists means it exists: written by
 *   this call's earlier attempt or by another sweep writing the same object.
 * - `delete`: 404 means the object is gone, which is what the delete wanted.
 * - `update`: patches. 404: the object is gone; 409: a precondition failed (it changed).
 */
export type WriteKind = 'create' | 'delete' | 'update';

export type WriteOutcome<T = void> =
  /** `already`: the answer said the object was already as wanted (409 on a create, 404 on a delete). */
  | { landed: true; value: T | undefined; already: boolean; failure: undefined }
  | { landed: false; why: 'conflict' | 'gone' | 'failed'; failure: ApiFailure };

const LANDED = { landed: true, value: undefined, already: false, failure: undefined } as const;
const ALREADY = { ...LANDED, already: true } as const;

/** What an error answer says about a write (pure). */
export function judgeWriteError(kind: WriteKind, error: unknown): WriteOutcome<never> {
  const failure = describeApiError(error);
  if (kind === 'create' && failure.status === 409) return ALREADY;
  if (kind === 'delete' && failure.status === 404) return ALREADY;
  if (failure.status === 404) return { landed: false, why: 'gone', failure };
  if (failure.status === 409) return { landed: false, why: 'conflict', failure };
  return { landed: false, why: 'failed', failure };
}

/**
 * Sends the write and judges its answer. When it failed (its answer may have been lost), `confirm`
 * reads the object back and says whether the write had landed; with `confirmConflicts` a 409 is
 * read back too (a retry after a lost answer conflicts with the write's own first attempt).
 */
export async function tryWrite<T>(
  kind: WriteKind,
  write: () => Promise<T>,
  confirm?: () => Promise<boolean>,
  options: { confirmConflicts?: boolean } = {},
): Promise<WriteOutcome<T>> {
  try {
    return { ...LANDED, value: await write() };
  } catch (error) {
    const outcome = judgeWriteError(kind, error);
    if (outcome.landed || !confirm) return outcome;
    if (outcome.why === 'gone' || (outcome.why === 'conflict' && !options.confirmConflicts)) return outcome;
    return (await confirm().catch(() => false)) ? LANDED : outcome;
  }
}

/** A patch's answer says a precondition failed (409): the object changed. */
export function isConflict(error: unknown): boolean {
  const outcome = judgeWriteError('update', error);
  return !outcome.landed && outcome.why === 'conflict';
}

interface AnnotationPatch {
  metadata?: { resourceVersion?: string; annotations?: Record<string, string | null> };
}

/** A patch conditional on the object's resourceVersion. */
export function isConditional(patch: object): boolean {
  return typeof (patch as AnnotationPatch).metadata?.resourceVersion === 'string';
}

/** The object read back carries every annotation the patch sets (and none it removes): the patch landed. */
export function carriesAnnotations(object: V1Job | V1CronJob, patch: object): boolean {
  const wanted = Object.entries((patch as AnnotationPatch).metadata?.annotations ?? {});
  const actual = object.metadata?.annotations ?? {};
  return wanted.length > 0 && wanted.every(([key, value]) => (value === null ? !(key in actual) : actual[key] === value));
}

/** A read that may find the object gone (404), as its value, `gone`, or why it failed. */
export type ReadOutcome<T> = { found: true; value: T } | { found: false; gone: boolean; failure: ApiFailure; error: unknown };

/** Reads an object; 404 means it is gone. The one place a read's answer is judged so. */
export async function tryRead<T>(read: () => Promise<T>): Promise<ReadOutcome<T>> {
  try {
    return { found: true, value: await read() };
  } catch (error) {
    const failure = describeApiError(error);
    return { found: false, gone: failure.status === 404, failure, error };
  }
}

/** `Reason: message` of a failed write, for audit lines. */
export function failureText(failure: ApiFailure): string {
  return `${failure.reason}: ${failure.message}`;
}
