// A heal (docs/contract.md "Healing"): recorded on the Job first (imagepull-sweeper/healed and
// healed-at, conditional on the Job as judged), then each pod recreated through the Eviction API
// or a deletion with its own grace period, conditional on the pod as judged (uid and
// resourceVersion), then its Normal Event. Once recorded, its cause is never healed again:
// a process that dies before the pods are recreated loses that one heal, never does it twice;
// a recreation whose request may still land is reported so, never tried as if it had not.
import type { V1Pod } from '@kubernetes/client-node';
import { containerThatRan, findStuckContainers } from '../classify/index.ts';
import type { ActStep, Decision, HealPlan } from '../judge/types.ts';
import type { ApiFailure } from '../kube/errors.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { failureText, tryRead, tryWrite } from '../kube/write-outcome.ts';
import { ANNOTATIONS } from '../policy/annotations.ts';
import { rfc3339Seconds } from './claim.ts';
import { healedPodEvent, type Reporter } from './events.ts';
import { notLanded, type WriteResult } from './write-result.ts';

/** A pod the kubelet rewrote between the read and the write is tried again as it is now, this many times in all. */
const ATTEMPTS = 3;

export async function healJob(gateway: KubeGateway, d: Decision, reporter: Reporter): Promise<WriteResult> {
  const job = d.jobView!;
  const plan = d.heal!;
  const annotations = { [ANNOTATIONS.healed]: plan.memory, [ANNOTATIONS.healedAt]: rfc3339Seconds(reporter.now) };
  const recorded = await tryWrite(
    'update',
    () => gateway.mergePatchJob(job.namespace, job.name, { metadata: { resourceVersion: job.resourceVersion, annotations } }),
    async () => (await gateway.readJob(job.namespace, job.name)).metadata?.annotations?.[ANNOTATIONS.healed] === plan.memory,
  );
  if (!recorded.landed) return notLanded(recorded);

  const steps: ActStep[] = [];
  const errors: string[] = [];
  for (const target of plan.pods) {
    const done = await recreate(gateway, d, target, plan.way);
    if (done.kind === 'found') {
      steps.push({ kind: 'found', text: done.text });
      continue;
    }
    if (done.kind === 'failed') {
      const landing = done.failure.mayHaveLanded ? ' (the request may still land: the heal is recorded, it is not tried again)' : '';
      errors.push(`pod ${target.pod} could not be ${plan.way === 'evict' ? 'evicted' : 'deleted'}: ${failureText(done.failure)}${landing}`);
      continue;
    }
    const how = plan.way === 'evict' ? 'evicted' : 'deleted';
    steps.push({ kind: 'healed', pod: `pod ${target.pod}`, how });
    const note = `Recreating pod ${target.pod} (${how === 'evicted' ? 'the Eviction API' : 'deleted'}): its cause is gone: ${target.evidence}`;
    const event = healedPodEvent(job, { name: target.pod, uid: target.uid }, d.image, note, reporter);
    const written = await tryWrite('create', () => gateway.createEvent(job.namespace, event));
    if (!written.landed) errors.push(`pod ${target.pod} ${how}, but its Event was not written: ${written.failure.message}`);
  }
  return { kind: 'done', steps, error: errors.length > 0 ? errors.join('; ') : undefined };
}

type Recreated = { kind: 'recreated' } | { kind: 'found'; text: string } | { kind: 'failed'; failure: ApiFailure };

async function recreate(gateway: KubeGateway, d: Decision, target: HealPlan['pods'][number], way: HealPlan['way']): Promise<Recreated> {
  const { namespace } = d;
  let resourceVersion = target.resourceVersion;
  for (let attempt = 1; ; attempt++) {
    const sent = await tryWrite('delete', () =>
      way === 'evict'
        ? gateway.evictPod(namespace, target.pod, target.uid, resourceVersion)
        : gateway.deletePod(namespace, target.pod, target.uid, resourceVersion),
    );
    if (sent.landed) return sent.already ? { kind: 'found', text: `pod ${target.pod} was already gone` } : { kind: 'recreated' };
    if (sent.why !== 'conflict' && !sent.failure.mayHaveLanded) return { kind: 'failed', failure: sent.failure };
    // A conflict, or an answer lost: the pod as it is now says what happened.
    const read = await tryRead(() => gateway.readPod(namespace, target.pod));
    if (!read.found && !read.gone) return { kind: 'failed', failure: sent.failure };
    const seen = read.found && read.value.metadata?.uid === target.uid ? read.value : undefined;
    if (!seen)
      return sent.why === 'conflict'
        ? { kind: 'found', text: `pod ${target.pod} was gone before it was recreated` }
        : { kind: 'recreated' };
    if (seen.metadata?.deletionTimestamp) {
      // This request's (an eviction marks the pod DisruptionTarget), or another's.
      return sent.why !== 'conflict' || evictedByApi(seen)
        ? { kind: 'recreated' }
        : { kind: 'found', text: `pod ${target.pod} was already terminating` };
    }
    if (sent.why !== 'conflict') return { kind: 'failed', failure: sent.failure };
    // The kubelet wrote its status in between: recreate it as it is now, if it still qualifies.
    const changed = whyNotNow(seen, d);
    if (changed) return { kind: 'found', text: `pod ${target.pod} ${changed} since it was judged: not recreated` };
    if (attempt >= ATTEMPTS) return { kind: 'failed', failure: sent.failure };
    resourceVersion = seen.metadata?.resourceVersion ?? resourceVersion;
  }
}

/** The Eviction API's mark on a pod it evicted. */
function evictedByApi(pod: V1Pod): boolean {
  return (pod.status?.conditions ?? []).some(
    (c) => c.type === 'DisruptionTarget' && c.status === 'True' && c.reason === 'EvictionByEvictionAPI',
  );
}

/** Why the pod as read now may not be recreated (a container ran, or none is stuck), or undefined. */
function whyNotNow(pod: V1Pod, d: Decision): string | undefined {
  const ran = containerThatRan(pod);
  if (ran) return `changed: its ${ran} has run`;
  const stuck = findStuckContainers(pod).filter((c) => c.controller?.uid === d.jobView?.uid);
  return stuck.length === 0 ? 'changed: no container of it is stuck any more' : undefined;
}
