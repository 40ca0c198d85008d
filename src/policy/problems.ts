// Policy problems: how a path and a problem are written, and zod's issues turned into problems
// located in the YAML text (unknown keys with a "did you mean" hint, missing keys at their parent).
import * as z from 'zod';
import { policyFileSchema } from './schema.ts';
import type { PolicyProblem } from './types.ts';
import { locate, type Loaded, type Target } from './yaml-position.ts';
import { compareText } from '../order.ts';

type Segment = string | number;

/** `rules[0].grace.permanent`, `matchLabels["app.kubernetes.io/name"]`; "" for the root. */
export function formatPath(path: readonly PropertyKey[]): string {
  return path
    .map((segment, i) => {
      if (typeof segment === 'number') return `[${segment}]`;
      const key = String(segment);
      if (/^[A-Za-z_$][\w$]*$/.test(key)) return i === 0 ? key : `.${key}`;
      return `[${JSON.stringify(key)}]`;
    })
    .join('');
}

export function formatProblem(source: string, p: PolicyProblem): string {
  return `${source}:${p.line}:${p.column} ${p.path || '(root)'}: ${p.message}`;
}

/** The zod issues of a failed validation as located problems, sorted, without repeats. */
export function schemaProblems(issues: readonly z.core.$ZodIssue[], raw: unknown, loaded: Loaded): PolicyProblem[] {
  const problems: PolicyProblem[] = [];
  for (const issue of issues) {
    const path = issue.path as Segment[];
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        problems.push({
          ...locate(loaded, [...path, key], 'key'),
          path: formatPath([...path, key]),
          message: unknownKeyMessage(key, allowedKeysAt(path)),
        });
      }
    } else if (issue.code === 'invalid_type' && path.length > 0 && valueAt(raw, path) === undefined) {
      problems.push({
        ...locate(loaded, path, 'parent'),
        path: formatPath(path),
        message: `missing required key ${JSON.stringify(String(path[path.length - 1]))}`,
      });
    } else {
      const target: Target = issue.code === 'custom' && issue.params?.['at'] === 'key' ? 'key' : 'value';
      problems.push({ ...locate(loaded, path, target), path: formatPath(path), message: issue.message });
    }
  }
  return uniqueProblems(problems);
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let current = root;
  for (const segment of path) {
    if (typeof current !== 'object' || current === null) return undefined;
    current = (current as Record<PropertyKey, unknown>)[segment];
  }
  return current;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}

/**
 * The allowed key a mistyped one most likely meant: a key within a few edits, or one that starts
 * with it (or it with the key); the fewest edits win (`namespace` → `namespaces`, not `name`).
 */
export function closestKey(key: string, allowed: readonly string[]): string | undefined {
  const lower = key.toLowerCase();
  const limit = Math.max(1, Math.floor(key.length / 3));
  let best: { candidate: string; distance: number } | undefined;
  for (const candidate of allowed) {
    const other = candidate.toLowerCase();
    const distance = editDistance(lower, other);
    const prefix = Math.min(lower.length, other.length) >= 3 && (lower.startsWith(other) || other.startsWith(lower));
    if (distance > limit && !prefix) continue;
    if (!best || distance < best.distance) best = { candidate, distance };
  }
  return best?.candidate;
}

/** Keys allowed in the mapping at `path` (for "did you mean"), if it is a mapping of the schema. */
function allowedKeysAt(path: readonly PropertyKey[]): string[] | undefined {
  let schema: unknown = policyFileSchema;
  for (const segment of path) {
    schema = unwrap(schema);
    if (schema instanceof z.ZodObject) schema = (schema.shape as Record<string, unknown>)[String(segment)];
    else if (schema instanceof z.ZodArray) schema = schema.element;
    else if (schema instanceof z.ZodRecord) schema = schema.valueType;
    else return undefined;
  }
  schema = unwrap(schema);
  return schema instanceof z.ZodObject ? Object.keys(schema.shape) : undefined;
}

function unwrap(schema: unknown): unknown {
  let s = schema;
  while (s instanceof z.ZodOptional) s = s.unwrap();
  return s;
}

function unknownKeyMessage(key: string, allowed: string[] | undefined): string {
  if (!allowed || allowed.length === 0) return `unknown key ${JSON.stringify(key)}`;
  const close = closestKey(key, allowed);
  return close
    ? `unknown key ${JSON.stringify(key)}; did you mean ${JSON.stringify(close)}?`
    : `unknown key ${JSON.stringify(key)}; allowed keys: ${allowed.join(', ')}`;
}

function byPosition(a: PolicyProblem, b: PolicyProblem): number {
  return a.line - b.line || a.column - b.column || compareText(a.path, b.path);
}

export function uniqueProblems(problems: PolicyProblem[]): PolicyProblem[] {
  const seen = new Set<string>();
  return problems
    .filter((p) => {
      const id = `${p.line}:${p.column}:${p.path}:${p.message}`;
      if (seen.has(id)) return false;
      seen.add(id);
      return true;
    })
    .sort(byPosition);
}
