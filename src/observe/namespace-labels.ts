// The labels of the namespaces with stuck pods, when the policy selects namespaces by label.
import { mapBounded } from '../concurrency.ts';
import { describeApiError } from '../kube/errors.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import type { StuckContainer } from '../model.ts';
import { policyNeedsNamespaceLabels } from '../policy/resolve.ts';
import type { Policy } from '../policy/types.ts';

export async function readNamespaceLabels(
  gateway: KubeGateway,
  policy: Policy,
  stuck: readonly Pick<StuckContainer, 'namespace'>[],
  concurrency: number,
): Promise<{ labels: Map<string, Record<string, string>>; unreadable: Map<string, string> }> {
  const labels = new Map<string, Record<string, string>>();
  const unreadable = new Map<string, string>();
  if (!policyNeedsNamespaceLabels(policy)) return { labels, unreadable };
  const namespaces = [...new Set(stuck.map((c) => c.namespace))];
  await mapBounded(namespaces, concurrency, async (name) => {
    try {
      const ns = await gateway.readNamespace(name);
      labels.set(name, { ...(ns.metadata?.labels ?? {}) });
    } catch (error) {
      unreadable.set(name, describeApiError(error).message);
    }
  });
  return { labels, unreadable };
}
