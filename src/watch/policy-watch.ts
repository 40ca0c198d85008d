// The watch on the policy ConfigMap: every edit, deletion or re-creation calls `onChange`, and the
// run loop sweeps (the sweep reads the policy itself, as every sweep does). After a 410 the
// ConfigMap is listed again, and a version other than the last one seen counts as a change.
import { describeApiError } from '../kube/errors.ts';
import { WatchExpiredError, type ConfigMapEvent, type WatchGateway } from '../kube/watch.ts';

export interface PolicyWatchOptions {
  namespace: string;
  name: string;
  watchTimeoutSeconds?: number;
  random?: () => number;
  sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  onChange: () => void;
  onRestart: (scope: string, reason: 'timeout' | 'dropped' | 'expired', error?: string) => void;
}

export async function watchPolicy(gateway: WatchGateway, options: PolicyWatchOptions, signal: AbortSignal): Promise<void> {
  const scope = `configmap ${options.namespace}/${options.name}`;
  // The version of the ConfigMap last seen ('' = none): a re-list that finds another one is a change.
  let known: string | undefined;
  let resourceVersion: string | undefined;
  let failures = 0;
  while (!signal.aborted) {
    try {
      if (resourceVersion === undefined) {
        const listed = await gateway.listConfigMap(options.namespace, options.name);
        const version = listed.configMap?.metadata?.resourceVersion ?? '';
        if (known !== undefined && version !== known) options.onChange();
        known = version;
        resourceVersion = listed.resourceVersion;
      }
      const timeoutSeconds = Math.round((options.watchTimeoutSeconds ?? 300) * (1 + 0.2 * (options.random ?? Math.random)()));
      const onEvent = (e: ConfigMapEvent) => {
        resourceVersion = e.resourceVersion || resourceVersion;
        failures = 0;
        if (e.type === 'BOOKMARK') return;
        known = e.type === 'DELETED' ? '' : (e.configMap.metadata?.resourceVersion ?? '');
        options.onChange();
      };
      await gateway.watchConfigMap(
        {
          namespace: options.namespace,
          name: options.name,
          resourceVersion,
          timeoutSeconds,
          idleTimeoutMs: (timeoutSeconds + 30) * 1000,
          signal,
        },
        onEvent,
      );
      if (!signal.aborted) options.onRestart(scope, 'timeout');
    } catch (error) {
      if (signal.aborted) break;
      if (error instanceof WatchExpiredError || describeApiError(error).status === 410) {
        options.onRestart(scope, 'expired', (error as Error).message);
        resourceVersion = undefined;
        continue;
      }
      failures += 1;
      options.onRestart(scope, 'dropped', describeApiError(error).message);
      await options.sleep(Math.min(30_000, 500 * 2 ** (failures - 1)), signal);
    }
  }
}
