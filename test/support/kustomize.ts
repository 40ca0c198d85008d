// A minimal `kubectl kustomize` for the tests (there is no kubectl here): `resources` (files, or
// directories holding a kustomization.yaml), `components` (kind Component), `images` (newName/newTag) and `patches` given inline
// as JSON 6902 operations (add, replace, remove) or `$patch: delete` with a kind/name target. Anything else in a
// kustomization is an error rather than silently ignored. `${VAR}` in an overlay is replaced from
// `vars` before parsing (per-run ports and names; kustomize itself has no variables).
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { KubernetesObject } from '@kubernetes/client-node';
import { parse as parseYaml, parseAllDocuments } from 'yaml';

interface Kustomization {
  apiVersion?: string;
  kind?: string;
  resources?: string[];
  components?: string[];
  images?: { name: string; newName?: string; newTag?: string }[];
  patches?: { target: { kind: string; name: string; namespace?: string }; patch: string }[];
}

interface Op {
  op: 'add' | 'replace' | 'remove';
  path: string;
  value?: unknown;
}

const KNOWN = new Set(['apiVersion', 'kind', 'resources', 'components', 'images', 'patches']);

function substitute(text: string, vars: Record<string, string>, file: string): string {
  return text.replace(/\$\{(\w+)\}/g, (_, name: string) => {
    const v = vars[name];
    if (v === undefined) throw new Error(`${file}: \${${name}} has no value`);
    return v;
  });
}

function loadObjects(file: string): KubernetesObject[] {
  const objects: KubernetesObject[] = [];
  for (const doc of parseAllDocuments(fs.readFileSync(file, 'utf8'))) {
    if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0]!.message}`);
    const obj = doc.toJS() as KubernetesObject | null;
    if (obj) objects.push(obj);
  }
  return objects;
}

/** JSON pointer segments (`~1` is `/`, `~0` is `~`). */
function pointer(p: string): string[] {
  if (!p.startsWith('/')) throw new Error(`patch path ${p}: must start with /`);
  return p
    .slice(1)
    .split('/')
    .map((s) => s.replaceAll('~1', '/').replaceAll('~0', '~'));
}

function applyOp(obj: unknown, op: Op, where: string): void {
  const segs = pointer(op.path);
  const last = segs.pop()!;
  let parent = obj as Record<string, unknown> | unknown[];
  for (const s of segs) {
    const next = Array.isArray(parent) ? parent[Number(s)] : parent[s];
    if (next === undefined || next === null || typeof next !== 'object')
      throw new Error(`${where}: ${op.op} ${op.path}: ${s} does not exist`);
    parent = next as Record<string, unknown> | unknown[];
  }
  if (Array.isArray(parent)) {
    const i = last === '-' ? parent.length : Number(last);
    if (!Number.isInteger(i) || i < 0 || i > parent.length) throw new Error(`${where}: ${op.op} ${op.path}: bad index ${last}`);
    if (op.op === 'add') parent.splice(i, 0, op.value);
    else if (i >= parent.length) throw new Error(`${where}: ${op.op} ${op.path}: no element ${i}`);
    else if (op.op === 'replace') parent[i] = op.value;
    else parent.splice(i, 1);
    return;
  }
  if (op.op !== 'add' && !(last in parent)) throw new Error(`${where}: ${op.op} ${op.path}: ${last} does not exist`);
  if (op.op === 'remove') delete parent[last];
  else parent[last] = op.value;
}

/** The objects `kubectl kustomize dir` would print, in resource order. */
export function renderKustomization(dir: string, vars: Record<string, string> = {}): KubernetesObject[] {
  return transform(dir, vars, 'Kustomization', []);
}

/**
 * Adds `dir`'s resources to `objects`, then its components (kind Component: their resources and
 * patches, applied to everything accumulated so far), then its images and patches.
 */
function transform(
  dir: string,
  vars: Record<string, string>,
  kind: 'Kustomization' | 'Component',
  objects: KubernetesObject[],
): KubernetesObject[] {
  const file = path.join(dir, 'kustomization.yaml');
  const k = parseYaml(substitute(fs.readFileSync(file, 'utf8'), vars, file)) as Kustomization;
  for (const key of Object.keys(k)) if (!KNOWN.has(key)) throw new Error(`${file}: ${key} is not supported by this renderer`);
  if (k.kind !== kind) throw new Error(`${file}: kind must be ${kind}`);

  for (const r of k.resources ?? []) {
    const p = path.resolve(dir, r);
    objects.push(...(fs.statSync(p).isDirectory() ? renderKustomization(p, vars) : loadObjects(p)));
  }
  for (const c of k.components ?? []) transform(path.resolve(dir, c), vars, 'Component', objects);
  for (const image of k.images ?? []) {
    let used = false;
    for (const obj of objects) {
      for (const c of containersOf(obj)) {
        const m = /^(.*?)(?::([^:/]+))?(@.*)?$/.exec(c.image ?? '');
        if (m?.[1] !== image.name) continue;
        c.image = `${image.newName ?? image.name}${image.newTag ? `:${image.newTag}` : m[2] ? `:${m[2]}` : ''}`;
        used = true;
      }
    }
    if (!used) throw new Error(`${file}: images: no container uses ${image.name}`);
  }
  for (const [i, p] of (k.patches ?? []).entries()) {
    const where = `${file}: patches[${i}]`;
    const targets = objects.filter(
      (o) =>
        o.kind === p.target.kind &&
        o.metadata?.name === p.target.name &&
        (p.target.namespace === undefined || o.metadata?.namespace === p.target.namespace),
    );
    if (targets.length === 0) throw new Error(`${where}: no ${p.target.kind} ${p.target.name}`);
    const ops = parseYaml(p.patch) as Op[] | { $patch?: string };
    if (!Array.isArray(ops) && ops.$patch === 'delete') {
      // A strategic-merge patch deleting the target (how an overlay drops a base's object).
      for (const t of targets) objects.splice(objects.indexOf(t), 1);
      continue;
    }
    if (!Array.isArray(ops)) throw new Error(`${where}: patch must be a list of JSON 6902 operations, or \`$patch: delete\``);
    for (const op of ops) {
      if (!['add', 'replace', 'remove'].includes(op.op)) throw new Error(`${where}: op ${op.op} is not supported`);
      for (const t of targets) applyOp(t, op, where);
    }
  }
  return objects;
}

function containersOf(obj: KubernetesObject): { image?: string }[] {
  const o = obj as { spec?: Record<string, unknown> };
  const podSpec = (spec: unknown): { containers?: { image?: string }[]; initContainers?: { image?: string }[] } | undefined =>
    (spec as { template?: { spec?: never } } | undefined)?.template?.spec;
  const spec =
    obj.kind === 'CronJob'
      ? podSpec((o.spec?.jobTemplate as { spec?: unknown } | undefined)?.spec)
      : obj.kind === 'Pod'
        ? (o.spec as never)
        : podSpec(o.spec);
  return [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])];
}
