// The policy inside a ConfigMap: a whole manifest (for `policy validate`) or a live ConfigMap's
// data; positions of problems always refer to the text the user gave.
import { isMap, isScalar } from 'yaml';
import type { Node, Scalar, YAMLMap } from 'yaml';
import { oversizedProblem, parsePolicyYaml, validate, type PolicyParseResult } from './parse.ts';
import { formatPath, uniqueProblems } from './problems.ts';
import { describeValue } from './messages.ts';
import type { PolicyProblem } from './types.ts';
import { keyText, load, locate, mapPair, position, resolveAlias, stringAt, valueOf, type Loaded } from './yaml-position.ts';

export const POLICY_KEY = 'policy.yaml';

export type PolicyDocumentResult = PolicyParseResult & {
  form: 'policy' | 'configmap';
  /** metadata of the manifest, for the `configmap` form. */
  configMap?: { name: string | undefined; namespace: string | undefined };
};

/** The policy held by a live ConfigMap's data. */
export function parseConfigMapData(data: Record<string, string> | undefined): PolicyParseResult {
  const text = data?.[POLICY_KEY];
  if (text === undefined) {
    const message = `ConfigMap has no data key ${JSON.stringify(POLICY_KEY)}`;
    return { ok: false, problems: [{ line: 1, column: 1, path: formatPath(['data', POLICY_KEY]), message }] };
  }
  return parsePolicyYaml(text);
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
  const tooLarge = oversizedProblem(text);
  if (tooLarge) return { ok: false, form: 'policy', problems: [tooLarge] };
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
