// Kueue's waitForPodsReady timeout, read from the cluster's Kueue configuration (docs/kueue.md):
// the ConfigMap Kueue's manager reads its Configuration from. Kueue v0.17 has no timeout of a
// Workload's own, so this one applies to every Job it queues. Read only when a Job Kueue queues
// is being judged (and by `policy explain` and at start-up), with RBAC that may not be granted:
// what could not be read is said, never guessed.
import { parse } from 'yaml';
import type { KueueTimeout } from '../judge/queue.ts';
import { describeApiError } from '../kube/errors.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { formatDuration, tryParseGoDuration } from '../policy/duration.ts';

/** Where Kueue's manifests and chart put its Configuration (`--kueue-config` names another ConfigMap). */
export const KUEUE_CONFIGURATION = { namespace: 'kueue-system', name: 'kueue-manager-config', key: 'controller_manager_config.yaml' };

export interface KueueConfigLocation {
  namespace: string;
  name: string;
}

/** The timeout when it applies, and what was read, in words. */
export interface KueueTimeoutRead {
  timeout: KueueTimeout | undefined;
  said: string;
}

const describe = (at: KueueConfigLocation) => `ConfigMap ${at.namespace}/${at.name}`;

export async function readKueueTimeout(gateway: KubeGateway, at: KueueConfigLocation = KUEUE_CONFIGURATION): Promise<KueueTimeoutRead> {
  const where = describe(at);
  let text: string | undefined;
  try {
    text = (await gateway.readConfigMap(at.namespace, at.name)).data?.[KUEUE_CONFIGURATION.key];
  } catch (error) {
    const failure = describeApiError(error);
    if (failure.status === 404) return { timeout: undefined, said: `Kueue's configuration: no ${where}` };
    return {
      timeout: undefined,
      said: `Kueue's configuration could not be read from ${where} (${failure.reason}: ${failure.message}); grant get on it to check graces against its timeout (docs/kueue.md)`,
    };
  }
  if (text === undefined) return { timeout: undefined, said: `Kueue's configuration: ${where} has no key ${KUEUE_CONFIGURATION.key}` };
  return parseKueueConfiguration(text, at);
}

/** Kueue's default timeout in its v1beta1 Configuration, when waitForPodsReady is enabled without one. */
const V1BETA1_DEFAULT_SECONDS = 300;

/** Pure: the waitForPodsReady timeout of a Kueue Configuration (config.kueue.x-k8s.io v1beta1 or v1beta2). */
export function parseKueueConfiguration(text: string, at: KueueConfigLocation = KUEUE_CONFIGURATION): KueueTimeoutRead {
  const where = describe(at);
  let config: unknown;
  try {
    config = parse(text);
  } catch (error) {
    return { timeout: undefined, said: `Kueue's configuration in ${where} is not YAML: ${(error as Error).message.split('\n')[0]}` };
  }
  const c = (config ?? {}) as { apiVersion?: unknown; waitForPodsReady?: { enable?: unknown; timeout?: unknown } | null };
  const wait = c.waitForPodsReady;
  const v1beta1 = c.apiVersion === 'config.kueue.x-k8s.io/v1beta1';
  if (!wait || typeof wait !== 'object' || (v1beta1 && wait.enable !== true)) {
    return { timeout: undefined, said: `Kueue's waitForPodsReady is off (${where}): Kueue does not evict Jobs whose pods are not ready` };
  }
  let seconds = v1beta1 ? V1BETA1_DEFAULT_SECONDS : undefined;
  if (typeof wait.timeout === 'string') {
    const parsed = tryParseGoDuration(wait.timeout);
    if (!parsed.ok) return { timeout: undefined, said: `Kueue's waitForPodsReady.timeout in ${where}: ${parsed.error}` };
    seconds = parsed.seconds;
  }
  if (seconds === undefined) return { timeout: undefined, said: `Kueue's waitForPodsReady has no timeout (${where})` };
  const source = `waitForPodsReady.timeout in ${where}`;
  return { timeout: { seconds, source }, said: `Kueue's waitForPodsReady timeout: ${formatDuration(seconds)} (${source})` };
}
