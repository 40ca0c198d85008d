// Where things are in a YAML text: parsing with line counting, walking a path to its node, and
// turning a path into a line and column. Knows nothing about the policy.
import { isAlias, isMap, isScalar, isSeq, LineCounter, parseDocument } from 'yaml';
import type { Document, Node, YAMLMap } from 'yaml';
import type { PolicyProblem } from './types.ts';

export interface Loaded {
  doc: Document;
  lines: LineCounter;
}

export function load(text: string): { ok: true; loaded: Loaded } | { ok: false; problems: PolicyProblem[]; loaded: Loaded } {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false });
  const loaded = { doc, lines };
  if (doc.errors.length === 0) return { ok: true, loaded };
  // The parser recurses per nesting level; thousands of `[` overflow its stack, not a syntax error.
  const tooDeep = doc.errors.find((error) => /call stack/i.test(error.message));
  if (tooDeep) {
    const message = 'the YAML nests too deeply to be read (a policy is a few levels deep); look for runaway [ or {';
    return { ok: false, problems: [{ ...position(lines, tooDeep.pos[0]), path: '', message }], loaded };
  }
  const problems = doc.errors.map((error) => ({
    ...position(lines, error.pos[0]),
    path: '',
    message: `YAML syntax error: ${error.message}`,
  }));
  return { ok: false, problems, loaded };
}

export function position(lines: LineCounter, offset: number): { line: number; column: number } {
  const { line, col } = lines.linePos(offset);
  return { line, column: col };
}

export function resolveAlias(doc: Document, node: unknown): unknown {
  let current = node;
  for (let hops = 0; isAlias(current) && hops < 100; hops++) current = current.resolve(doc);
  return current;
}

export function keyText(key: unknown): string {
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

export function isNodeLike(value: unknown): value is Node {
  return typeof value === 'object' && value !== null && 'range' in value;
}

function nodeStart(node: unknown): number | undefined {
  return isNodeLike(node) && node.range ? node.range[0] : undefined;
}

function isEmptyScalar(node: unknown): boolean {
  return isScalar(node) && node.value === null && !!node.range && node.range[0] === node.range[1];
}

export type Target = 'value' | 'key' | 'parent';

export function locate(loaded: Loaded, path: readonly PropertyKey[], target: Target): { line: number; column: number } {
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

export function mapPair(map: YAMLMap, key: string): { key: Node | undefined; value: unknown } | undefined {
  const pair = map.items.find((p) => keyText(p.key) === key);
  return pair ? { key: isNodeLike(pair.key) ? pair.key : undefined, value: pair.value } : undefined;
}

export function stringAt(doc: Document, map: unknown, key: string): string | undefined {
  if (!isMap(map)) return undefined;
  const value = resolveAlias(doc, mapPair(map, key)?.value);
  return isScalar(value) && typeof value.value === 'string' ? value.value : undefined;
}

export function valueOf(doc: Document, map: unknown, key: string): unknown {
  if (!isMap(map)) return undefined;
  const node = resolveAlias(doc, mapPair(map, key)?.value);
  return isScalar(node) || isMap(node) || isSeq(node) ? node.toJS(doc) : node;
}
