import { readFile } from 'node:fs/promises';
import { describeApiError, type ApiFailure } from '../kube/errors.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { DEFAULT_RETRY, withRetry } from '../kube/retry.ts';
import { BUILTIN_POLICY, POLICY_KEY, parsePolicyDocument, parsePolicyYaml } from '../policy/parse.ts';
import type { Policy, PolicyProblem } from '../policy/types.ts';

export const DEFAULT_POLICY_CONFIGMAP = 'imagepull-sweeper-policy';

export type PolicyLocation = { kind: 'configmap'; namespace: string; name: string } | { kind: 'file'; path: string };

export type LoadedPolicy =
  | { ok: true; policy: Policy; description: string; builtin: boolean; warnings: PolicyProblem[] }
  | { ok: false; kind: 'invalid'; description: string; problems: PolicyProblem[]; configMapUid: string | undefined }
  | { ok: false; kind: 'unreachable'; description: string; failure: ApiFailure }
  | { ok: false; kind: 'unreadable-file'; description: string; message: string };

export function describeLocation(location: PolicyLocation): string {
  return location.kind === 'file' ? `file ${location.path}` : `ConfigMap ${location.namespace}/${location.name}`;
}

/** Reads and validates the policy; a missing ConfigMap means the built-in defaults. */
export async function loadPolicy(gateway: KubeGateway | undefined, location: PolicyLocation): Promise<LoadedPolicy> {
  const description = describeLocation(location);
  if (location.kind === 'file') {
    let text: string;
    try {
      text = location.path === '-' ? await readStdin() : await readFile(location.path, 'utf8');
    } catch (error) {
      return { ok: false, kind: 'unreadable-file', description, message: (error as Error).message };
    }
    const parsed = parsePolicyDocument(text);
    return parsed.ok
      ? { ok: true, policy: parsed.policy, description, builtin: false, warnings: parsed.warnings }
      : { ok: false, kind: 'invalid', description, problems: parsed.problems, configMapUid: undefined };
  }
  if (!gateway) throw new Error('a ConfigMap policy needs a cluster connection');
  try {
    const configMap = await withRetry(() => gateway.readConfigMap(location.namespace, location.name), DEFAULT_RETRY);
    const text = configMap.data?.[POLICY_KEY];
    const uid = configMap.metadata?.uid;
    if (text === undefined) {
      const message = `ConfigMap has no data key "${POLICY_KEY}"`;
      return { ok: false, kind: 'invalid', description, problems: [{ line: 1, column: 1, path: `data["${POLICY_KEY}"]`, message }], configMapUid: uid };
    }
    const parsed = parsePolicyYaml(text);
    return parsed.ok
      ? { ok: true, policy: parsed.policy, description, builtin: false, warnings: parsed.warnings }
      : { ok: false, kind: 'invalid', description, problems: parsed.problems, configMapUid: uid };
  } catch (error) {
    const failure = describeApiError(error);
    if (failure.status === 404) {
      return { ok: true, policy: BUILTIN_POLICY, description: `built-in defaults (no ${description})`, builtin: true, warnings: [] };
    }
    return { ok: false, kind: 'unreachable', description, failure };
  }
}

export function formatProblem(source: string, p: PolicyProblem): string {
  return `${source}:${p.line}:${p.column} ${p.path || '(root)'}: ${p.message}`;
}

export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
