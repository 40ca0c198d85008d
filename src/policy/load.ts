// Where the policy comes from (a file, stdin or a ConfigMap) and reading it from there. Stdin is
// read by the CLI, which hands its reader over with the location.
import { open } from 'node:fs/promises';
import { describeApiError, type ApiFailure } from '../kube/errors.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { parseConfigMapData, parsePolicyDocument, POLICY_KEY } from './configmap.ts';
import { FALLBACK_POLICY } from './defaults.ts';
import { MAX_POLICY_BYTES } from './parse.ts';
import type { Policy, PolicyProblem } from './types.ts';

export const DEFAULT_POLICY_CONFIGMAP = 'imagepull-sweeper-policy';

/**
 * Where the policy is read. `isDefault`: the ConfigMap nobody named (the sweeper's own default);
 * only that one may be missing. A ConfigMap named on the command line must exist.
 */
export type PolicyLocation =
  | { kind: 'configmap'; namespace: string; name: string; isDefault?: boolean }
  | { kind: 'file'; path: string; /** Reads stdin, for the path `-`. */ stdin?: () => Promise<string> };

export type LoadedPolicy =
  | { ok: true; policy: Policy; description: string; builtin: boolean; warnings: PolicyProblem[] }
  | {
      ok: false;
      kind: 'invalid';
      description: string;
      problems: PolicyProblem[];
      configMapUid: string | undefined;
      /** The named ConfigMap does not exist. */
      missing?: boolean;
    }
  | { ok: false; kind: 'unreachable'; description: string; failure: ApiFailure }
  | { ok: false; kind: 'unreadable-file'; description: string; message: string };

/**
 * Where a policy problem is, before its `:line:column`: the file's path (`<stdin>` for `-`), or
 * the ConfigMap's key (`ns/name:policy.yaml`). The one way every command locates a problem.
 */
export function problemSource(location: PolicyLocation): string {
  if (location.kind === 'file') return location.path === '-' ? '<stdin>' : location.path;
  return `${location.namespace}/${location.name}:${POLICY_KEY}`;
}

export function describeLocation(location: PolicyLocation): string {
  return location.kind === 'file' ? `file ${location.path}` : `ConfigMap ${location.namespace}/${location.name}`;
}

/**
 * The text of a policy file. The one place policy files are read. Reads at most one byte more
 * than MAX_POLICY_BYTES, so a huge file costs no memory and still fails as too large; the buffer
 * starts at the file's size (a sweep reads the policy often: a 1 MiB buffer each time showed in
 * the watch's garbage collection).
 */
export async function readPolicyFile(path: string): Promise<string> {
  const file = await open(path, 'r');
  try {
    const limit = MAX_POLICY_BYTES + 1;
    let buffer = Buffer.allocUnsafe(Math.min(limit, Math.max(4096, (await file.stat()).size + 1)));
    let length = 0;
    for (;;) {
      if (length === buffer.length) {
        if (buffer.length === limit) break;
        const grown = Buffer.allocUnsafe(Math.min(limit, buffer.length * 2));
        buffer.copy(grown, 0, 0, length);
        buffer = grown;
      }
      const { bytesRead } = await file.read(buffer, length, buffer.length - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    return buffer.subarray(0, length).toString('utf8');
  } finally {
    await file.close();
  }
}

/**
 * `parse`, answering again from its last result while the text is the same: a long-running
 * process reads the same policy before every sweep (in the watch, every batch), and parsing is
 * most of that read's cost. A parsed policy is never changed after parsing.
 */
function sameTextOnce<T>(parse: (text: string) => T): (text: string) => T {
  let last: { text: string; result: T } | undefined;
  return (text) => {
    if (last?.text !== text) last = { text, result: parse(text) };
    return last.result;
  };
}
const parseFilePolicy = sameTextOnce(parsePolicyDocument);
const parseConfigMapPolicy = sameTextOnce((text) => parseConfigMapData({ [POLICY_KEY]: text }));

/**
 * Reads and validates the policy. A missing default ConfigMap means the fallback policy; a
 * missing ConfigMap that was named is an invalid policy.
 */
export async function loadPolicy(gateway: KubeGateway | undefined, location: PolicyLocation): Promise<LoadedPolicy> {
  const description = describeLocation(location);
  if (location.kind === 'file') {
    let text: string;
    try {
      text = location.path === '-' && location.stdin ? await location.stdin() : await readPolicyFile(location.path);
    } catch (error) {
      return { ok: false, kind: 'unreadable-file', description, message: (error as Error).message };
    }
    const parsed = parseFilePolicy(text);
    return parsed.ok
      ? { ok: true, policy: parsed.policy, description, builtin: false, warnings: parsed.warnings }
      : { ok: false, kind: 'invalid', description, problems: parsed.problems, configMapUid: undefined };
  }
  if (!gateway) throw new Error('a ConfigMap policy needs a cluster connection');
  try {
    const configMap = await gateway.readConfigMap(location.namespace, location.name);
    const text = configMap.data?.[POLICY_KEY];
    const parsed = text === undefined ? parseConfigMapData(configMap.data) : parseConfigMapPolicy(text);
    return parsed.ok
      ? { ok: true, policy: parsed.policy, description, builtin: false, warnings: parsed.warnings }
      : { ok: false, kind: 'invalid', description, problems: parsed.problems, configMapUid: configMap.metadata?.uid };
  } catch (error) {
    const failure = describeApiError(error);
    if (failure.status === 404 && location.isDefault === true) {
      return { ok: true, policy: FALLBACK_POLICY, description: `built-in defaults (no ${description})`, builtin: true, warnings: [] };
    }
    if (failure.status === 404) {
      const message = `${description} does not exist; create it (key ${JSON.stringify(POLICY_KEY)}), or leave out --policy-configmap to use the default policy ConfigMap`;
      return {
        ok: false,
        kind: 'invalid',
        description,
        problems: [{ line: 1, column: 1, path: '', message }],
        configMapUid: undefined,
        missing: true,
      };
    }
    return { ok: false, kind: 'unreachable', description, failure };
  }
}
