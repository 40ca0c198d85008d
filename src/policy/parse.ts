// Policy text → Policy, with every problem located by line and column.
import { isAlias, isMap, isScalar, isSeq, LineCounter, parseDocument } from 'yaml';
import type { Document, Node, Scalar, YAMLMap } from 'yaml';
import { allowedKeysAt, describeValue, policyErrorMap, policyFileSchema, toPolicy } from './schema.ts';
import { isEmptySelector } from './selector.ts';
import type { Policy, PolicyProblem, Rule } from './types.ts';

export const POLICY_KEY = 'policy.yaml';
export const BUILTIN_RULE_NAME = 'builtin-system-namespaces';
export const SYSTEM_NAMESPACES = ['kube-system', 'kube-public', 'kube-node-lease'] as const;

export type PolicyParseResult =
  | { ok: true; policy: Policy; warnings: PolicyProblem[] }
  | { ok: false; problems: PolicyProblem[] };

export type PolicyDocumentResult = PolicyParseResult & {
  form: 'policy' | 'configmap';
  /** metadata of the manifest, for the `configmap` form. */
  configMap?: { name: string | undefined; namespace: string | undefined };
};

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

/** The built-in defaults, no rules. */
export const DEFAULTS: Policy = deepFreeze(toPolicy({}));

/** In force when no policy ConfigMap exists at all: the defaults plus a rule ignoring system namespaces. */
export const BUILTIN_POLICY: Policy = deepFreeze({
  ...toPolicy({}),
  rules: [{ name: BUILTIN_RULE_NAME, namespaces: [...SYSTEM_NAMESPACES], action: 'ignore' }],
});

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

interface Loaded {
  doc: Document;
  lines: LineCounter;
}

function load(text: string): { ok: true; loaded: Loaded } | { ok: false; problems: PolicyProblem[]; loaded: Loaded } {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false });
  const loaded = { doc, lines };
  if (doc.errors.length === 0) return { ok: true, loaded };
  const problems = doc.errors.map((error) => ({
    ...position(lines, error.pos[0]),
    path: '',
    message: `YAML syntax error: ${error.message}`,
  }));
  return { ok: false, problems, loaded };
}

function position(lines: LineCounter, offset: number): { line: number; column: number } {
  const { line, col } = lines.linePos(offset);
  return { line, column: col };
}

function resolveAlias(doc: Document, node: unknown): unknown {
  let current = node;
  for (let hops = 0; isAlias(current) && hops < 100; hops++) current = current.resolve(doc);
  return current;
}

function keyText(key: unknown): string {
  return isScalar(key) ? String(key.value) : String(key);
}

interface Step {
  key: Node | undefined;
  node: unknown;
}

/** The nodes along `path`, as far as the document has them. */
function walk(doc: Document, path: readonly PropertyKey[]): Step[] {
  const trail: Step[] = [{ key: undefined, node: doc.contents }];
  for (const segment of path) {
    const current = resolveAlias(doc, trail[trail.length - 1]!.node);
    if (isMap(current)) {
      const pair = current.items.find((p) => keyText(p.key) === String(segment));
      if (!pair) break;
      trail.push({ key: isNodeLike(pair.key) ? pair.key : undefined, node: pair.value });
    } else if (isSeq(current) && typeof segment === 'number' && segment < current.items.length) {
      trail.push({ key: undefined, node: current.items[segment] });
    } else {
      break;
    }
  }
  return trail;
}

function isNodeLike(value: unknown): value is Node {
  return typeof value === 'object' && value !== null && 'range' in value;
}

function nodeStart(node: unknown): number | undefined {
  return isNodeLike(node) && node.range ? node.range[0] : undefined;
}

function isEmptyScalar(node: unknown): boolean {
  return isScalar(node) && node.value === null && !!node.range && node.range[0] === node.range[1];
}

type Target = 'value' | 'key' | 'parent';

function locate(loaded: Loaded, path: readonly PropertyKey[], target: Target): { line: number; column: number } {
  const trail = walk(loaded.doc, path);
  const complete = trail.length === path.length + 1;
  let offset: number | undefined;
  if (target === 'parent') {
    offset = nodeStart(trail[Math.min(path.length - 1, trail.length - 1)]?.node);
  } else if (complete) {
    const last = trail[trail.length - 1]!;
    const preferKey = target === 'key' || last.node === null || last.node === undefined || isEmptyScalar(last.node);
    offset = (preferKey ? nodeStart(last.key) : undefined) ?? nodeStart(last.node) ?? nodeStart(last.key);
  }
  for (let i = trail.length - 1; offset === undefined && i >= 0; i--) {
    offset = nodeStart(trail[i]!.node) ?? nodeStart(trail[i]!.key);
  }
  return offset === undefined ? { line: 1, column: 1 } : position(loaded.lines, offset);
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

function unknownKeyMessage(key: string, allowed: string[] | undefined): string {
  if (!allowed || allowed.length === 0) return `unknown key ${JSON.stringify(key)}`;
  const lower = key.toLowerCase();
  const close = allowed
    .map((candidate) => {
      const other = candidate.toLowerCase();
      const prefix = Math.min(lower.length, other.length) >= 3 && (lower.startsWith(other) || other.startsWith(lower));
      return { candidate, distance: prefix ? 0.5 : editDistance(lower, other) };
    })
    .filter(({ distance }) => distance <= Math.max(1, Math.floor(key.length / 3)))
    .sort((x, y) => x.distance - y.distance)[0];
  return close
    ? `unknown key ${JSON.stringify(key)}; did you mean ${JSON.stringify(close.candidate)}?`
    : `unknown key ${JSON.stringify(key)}; allowed keys: ${allowed.join(', ')}`;
}

function byPosition(a: PolicyProblem, b: PolicyProblem): number {
  return a.line - b.line || a.column - b.column || a.path.localeCompare(b.path);
}

function uniqueProblems(problems: PolicyProblem[]): PolicyProblem[] {
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

function isCatchAll(rule: Rule): boolean {
  const anyName = !rule.namespaces || rule.namespaces.some((glob) => /^\*+$/.test(glob));
  const anyLabels = !rule.namespaceSelector || isEmptySelector(rule.namespaceSelector);
  return anyName && anyLabels;
}

function unreachableRuleWarnings(policy: Policy, loaded: Loaded): PolicyProblem[] {
  const catchAll = policy.rules.findIndex(isCatchAll);
  if (catchAll < 0) return [];
  const shadowing = policy.rules[catchAll]!.name;
  return policy.rules.slice(catchAll + 1).map((rule, offset) => {
    const path = ['rules', catchAll + 1 + offset];
    return {
      ...locate(loaded, path, 'value'),
      path: formatPath(path),
      message: `rule ${JSON.stringify(rule.name)} can never match: rule ${JSON.stringify(shadowing)} before it matches every namespace`,
    };
  });
}

function validate(loaded: Loaded): PolicyParseResult {
  const { doc } = loaded;
  const root = resolveAlias(doc, doc.contents);
  if (root === null || root === undefined || (isScalar(root) && root.value === null)) {
    return { ok: true, policy: toPolicy({}), warnings: [] };
  }
  let raw: unknown;
  try {
    raw = doc.toJS();
  } catch (error) {
    return { ok: false, problems: [{ line: 1, column: 1, path: '', message: `cannot read the YAML: ${(error as Error).message}` }] };
  }
  if (!isMap(root)) {
    return {
      ok: false,
      problems: [
        {
          ...locate(loaded, [], 'value'),
          path: '',
          message: `the policy must be a mapping (with keys defaults, rules, limits), got ${describeValue(raw)}`,
        },
      ],
    };
  }
  const result = policyFileSchema.safeParse(raw, { error: policyErrorMap });
  if (result.success) {
    const policy = toPolicy(result.data);
    return { ok: true, policy, warnings: unreachableRuleWarnings(policy, loaded) };
  }
  const problems: PolicyProblem[] = [];
  for (const issue of result.error.issues) {
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
  return { ok: false, problems: uniqueProblems(problems) };
}

/** Parses the policy YAML (the ConfigMap's `policy.yaml`). Returns every problem, not just the first. */
export function parsePolicyYaml(text: string): PolicyParseResult {
  const loaded = load(text);
  if (!loaded.ok) return { ok: false, problems: uniqueProblems(loaded.problems) };
  return validate(loaded.loaded);
}

function mapPair(map: YAMLMap, key: string): { key: Node | undefined; value: unknown } | undefined {
  const pair = map.items.find((p) => keyText(p.key) === key);
  return pair ? { key: isNodeLike(pair.key) ? pair.key : undefined, value: pair.value } : undefined;
}

function stringAt(doc: Document, map: unknown, key: string): string | undefined {
  if (!isMap(map)) return undefined;
  const value = resolveAlias(doc, mapPair(map, key)?.value);
  return isScalar(value) && typeof value.value === 'string' ? value.value : undefined;
}

type PositionMap = (p: PolicyProblem) => PolicyProblem;

/** Maps positions inside the `policy.yaml` string to positions in the manifest text. */
function scalarPositionMap(text: string, loaded: Loaded, scalar: Scalar, key: Node | undefined): PositionMap {
  const start = scalar.range?.[0] ?? 0;
  const at = position(loaded.lines, start);
  if (scalar.type === 'BLOCK_LITERAL' || scalar.type === 'BLOCK_FOLDED') {
    const headerEnd = text.indexOf('\n', start);
    const header = text.slice(start, headerEnd < 0 ? text.length : headerEnd);
    const explicit = /^[|>][-+]?([1-9])/.exec(header);
    let indent = 0;
    if (explicit) {
      const parentIndent = key?.range ? position(loaded.lines, key.range[0]).column - 1 : 0;
      indent = parentIndent + Number(explicit[1]);
    } else {
      const body = text.slice(headerEnd + 1, scalar.range?.[1] ?? text.length);
      const firstContent = body.split('\n').find((line) => line.trim() !== '');
      indent = firstContent ? firstContent.length - firstContent.trimStart().length : 0;
    }
    return (p) => ({ ...p, line: at.line + p.line, column: p.column + indent });
  }
  return (p) => ({ ...p, ...at, message: `${p.message} (at line ${p.line}, column ${p.column} of ${POLICY_KEY})` });
}

/**
 * Parses either the raw policy YAML or a whole ConfigMap manifest holding it under
 * `data["policy.yaml"]`; positions always refer to `text`.
 */
export function parsePolicyDocument(text: string): PolicyDocumentResult {
  const outer = load(text);
  const { doc } = outer.loaded;
  const root = resolveAlias(doc, doc.contents);
  const kind = stringAt(doc, root, 'kind');
  const looksLikeManifest = isMap(root) && mapPair(root, 'apiVersion') !== undefined && mapPair(root, 'kind') !== undefined;
  if (!outer.ok) {
    return { ok: false, form: kind === 'ConfigMap' ? 'configmap' : 'policy', problems: uniqueProblems(outer.problems) };
  }
  if (kind !== 'ConfigMap') {
    if (looksLikeManifest) {
      const problem = {
        ...locate(outer.loaded, ['kind'], 'value'),
        path: 'kind',
        message: `expected the policy YAML or a ConfigMap manifest, got kind ${describeValue(valueOf(doc, root, 'kind'))}`,
      };
      return { ok: false, form: 'policy', problems: [problem] };
    }
    return { ...validate(outer.loaded), form: 'policy' };
  }

  const manifest = root as YAMLMap;
  const metadata = resolveAlias(doc, mapPair(manifest, 'metadata')?.value);
  const configMap = { name: stringAt(doc, metadata, 'name'), namespace: stringAt(doc, metadata, 'namespace') };
  const fail = (problem: PolicyProblem): PolicyDocumentResult => ({ ok: false, form: 'configmap', configMap, problems: [problem] });
  const dataPath = ['data', POLICY_KEY];
  const data = resolveAlias(doc, mapPair(manifest, 'data')?.value);
  const entry = isMap(data) ? mapPair(data, POLICY_KEY) : undefined;
  if (!entry) {
    const others = isMap(data) ? data.items.map((p) => keyText(p.key)) : [];
    const found = others.length > 0 ? ` (it has ${others.map((k) => JSON.stringify(k)).join(', ')})` : '';
    return fail({
      ...locate(outer.loaded, isMap(data) ? dataPath : ['data'], isMap(data) ? 'parent' : 'value'),
      path: formatPath(dataPath),
      message: `ConfigMap has no data key ${JSON.stringify(POLICY_KEY)}${found}`,
    });
  }
  const value = resolveAlias(doc, entry.value);
  if (!isScalar(value) || typeof value.value !== 'string') {
    return fail({
      ...locate(outer.loaded, dataPath, 'value'),
      path: formatPath(dataPath),
      message: `${formatPath(dataPath)} must be a string holding the policy YAML (write "${POLICY_KEY}: |" and the policy indented below), got ${describeValue(isScalar(value) ? value.value : valueOf(doc, data, POLICY_KEY))}`,
    });
  }
  const inner = parsePolicyYaml(value.value);
  const toManifest = scalarPositionMap(text, outer.loaded, value, entry.key);
  return inner.ok
    ? { ok: true, form: 'configmap', configMap, policy: inner.policy, warnings: inner.warnings.map(toManifest) }
    : { ok: false, form: 'configmap', configMap, problems: inner.problems.map(toManifest) };
}

function valueOf(doc: Document, map: unknown, key: string): unknown {
  if (!isMap(map)) return undefined;
  const node = resolveAlias(doc, mapPair(map, key)?.value);
  return isScalar(node) || isMap(node) || isSeq(node) ? node.toJS(doc) : node;
}
