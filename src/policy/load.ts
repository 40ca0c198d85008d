// Where the policy comes from (a file, stdin or a ConfigMap) and reading it from there.
import { readFile } from 'node:fs/promises';
import { describeApiError, type ApiFailure } from '../kube/errors.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { parseConfigMapData, parsePolicyDocument } from './configmap.ts';
import { FALLBACK_POLICY } from './defaults.ts';
import type { Policy, PolicyProblem } from './types.ts';

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

/** The text of a policy file; `-` is stdin. The one place policy files are read. */
export function readPolicyFile(path: string, stdin: () => Promise<string> = readStdin): Promise<string> {
  return path === '-' ? stdin() : readFile(path, 'utf8');
}

/** Reads and validates the policy; a missing ConfigMap means the fallback policy. */
export async function loadPolicy(gateway: KubeGateway | undefined, location: PolicyLocation): Promise<LoadedPolicy> {
  const description = describeLocation(location);
  if (location.kind === 'file') {
    let text: string;
    try {
      text = await readPolicyFile(location.path);
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
    const configMap = await gateway.readConfigMap(location.namespace, location.name);
    const parsed = parseConfigMapData(configMap.data);
    return parsed.ok
      ? { ok: true, policy: parsed.policy, description, builtin: false, warnings: parsed.warnings }
      : { ok: false, kind: 'invalid', description, problems: parsed.problems, configMapUid: configMap.metadata?.uid };
  } catch (error) {
    const failure = describeApiError(error);
    if (failure.status === 404) {
      return { ok: true, policy: FALLBACK_POLICY, description: `built-in defaults (no ${description})`, builtin: true, warnings: [] };
    }
    return { ok: false, kind: 'unreachable', description, failure };
  }
}

export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
