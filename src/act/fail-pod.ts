// The podFailurePolicy path's pod steps: add the FailJob condition to the stuck pod, then delete
// it, both conditional on the pod as it was seen (uid and resourceVersion).
import type { V1Pod } from '@kubernetes/client-node';
import { findStuckContainers } from '../classify/index.ts';
import { formatClaimMessage } from '../judge/claim-message.ts';
import type { Decision } from '../judge/types.ts';
import type { ApiFailure } from '../kube/errors.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { tryRead, tryWrite } from '../kube/write-outcome.ts';
import type { StuckContainer } from '../model.ts';
import { truncate } from '../text.ts';

/**
 * How the pod steps ended: done, the pod changed since it was judged (its stuck containers now), a
 * write failed, or the delete's outcome is unknown (it failed, and the pod could not be read back
 * or a request of it may still be carried out: the pod may be deleted, and the Job controller
 * failing the Job).
 */
export type PodSteps =
  | { kind: 'done' }
  | { kind: 'changed'; stuck: StuckContainer[] }
  | { kind: 'failed'; failure: ApiFailure }
  | { kind: 'unknown'; failure: ApiFailure };

const DELETE_ATTEMPTS = 3;

export async function failPod(gateway: KubeGateway, d: Decision, now: Date): Promise<PodSteps> {
  const condition = {
    type: d.failJobCondition!,
    status: 'True',
    reason: d.reason,
    message: truncate(formatClaimMessage(d), 32_768),
    lastTransitionTime: now.toISOString(),
    lastProbeTime: null,
  };
  const stuckNow = (pod: V1Pod): StuckContainer[] =>
    pod.metadata?.uid === d.podUid ? findStuckContainers(pod).filter((c) => c.controller?.uid === d.jobView!.uid) : [];
  const marked = (pod: V1Pod) => (pod.status?.conditions ?? []).some((c) => c.type === condition.type && c.status === 'True');
  // tryWrite's confirm answers only whether the write landed; the pod it read is kept here.
  const confirming = remembered(() => readPod(gateway, d.namespace, d.pod));
  const markLanded = async () => {
    const pod = await confirming.read();
    return pod !== 'gone' && pod !== undefined && pod.metadata?.uid === d.podUid && marked(pod);
  };

  const patch = { metadata: { resourceVersion: d.podResourceVersion }, status: { conditions: [condition] } };
  const mark = await tryWrite('update', () => gateway.patchPodStatus(d.namespace, d.pod, patch), markLanded, { confirmConflicts: true });
  let resourceVersion = d.podResourceVersion;
  if (mark.landed) {
    // Read back when its answer was lost: delete the pod as it is now.
    const seen = confirming.last();
    const pod = mark.value ?? (seen !== 'gone' ? seen : undefined);
    resourceVersion = pod?.metadata?.resourceVersion ?? resourceVersion;
  } else {
    const seen = confirming.last();
    if (mark.why === 'gone' || seen === 'gone' || (seen && seen.metadata?.uid !== d.podUid)) return { kind: 'changed', stuck: [] };
    if (seen && mark.why === 'conflict') return { kind: 'changed', stuck: stuckNow(seen) };
    return { kind: 'failed', failure: mark.failure };
  }

  for (let attempt = 1; ; attempt += 1) {
    const deleting = remembered(() => readPod(gateway, d.namespace, d.pod));
    const gone = async () => {
      const pod = await deleting.read();
      return pod === 'gone' || pod === undefined ? pod === 'gone' : pod.metadata?.uid !== d.podUid || !!pod.metadata?.deletionTimestamp;
    };
    const deleted = await tryWrite('delete', () => gateway.deletePod(d.namespace, d.pod, d.podUid, resourceVersion), gone, {
      confirmConflicts: true,
    });
    if (deleted.landed) return { kind: 'done' };
    const seen = deleting.last();
    if (seen === undefined) return { kind: 'unknown', failure: deleted.failure };
    // The pod read back is not deleted yet, but a request of this delete may still be carried out.
    if (deleted.why === 'failed' && deleted.failure.mayHaveLanded) return { kind: 'unknown', failure: deleted.failure };
    if (seen === 'gone' || deleted.why !== 'conflict' || attempt >= DELETE_ATTEMPTS) return { kind: 'failed', failure: deleted.failure };
    // The kubelet wrote the pod in between: delete it as it is now, if it is still stuck.
    if (!marked(seen) || stuckNow(seen).length === 0) return { kind: 'changed', stuck: stuckNow(seen) };
    resourceVersion = seen.metadata?.resourceVersion ?? resourceVersion;
  }
}

type PodRead = V1Pod | 'gone' | undefined;

/** A read whose last answer stays at hand (`last()`: undefined until read, or when the read failed). */
function remembered(read: () => Promise<PodRead>): { read: () => Promise<PodRead>; last: () => PodRead } {
  const answers: PodRead[] = [];
  return {
    read: async () => {
      const answer = await read();
      answers.push(answer);
      return answer;
    },
    last: () => answers.at(-1),
  };
}

async function readPod(gateway: KubeGateway, namespace: string, name: string): Promise<PodRead> {
  const read = await tryRead(() => gateway.readPod(namespace, name));
  return read.found ? read.value : read.gone ? 'gone' : undefined;
}
