// The InvalidPolicy Event on the policy ConfigMap, once per distinct set of problems.
import type { KubeGateway } from '../kube/gateway.ts';
import { tryWrite } from '../kube/write-outcome.ts';
import { invalidPolicyEvent, type Reporter } from './events.ts';

/** `already`: the same problems were reported before (the Event's name is fixed by them). */
export type InvalidPolicyWrite = { written: true; already: boolean; name: string | undefined } | { written: false; error: string };

export async function writeInvalidPolicyEvent(
  gateway: KubeGateway,
  configMap: { namespace: string; name: string; uid: string | undefined },
  problems: string[],
  reporter: Reporter,
): Promise<InvalidPolicyWrite> {
  const event = invalidPolicyEvent(configMap, problems, reporter);
  const written = await tryWrite('create', () => gateway.createEvent(configMap.namespace, event));
  return written.landed
    ? { written: true, already: written.already, name: event.metadata?.name }
    : { written: false, error: written.failure.message };
}
