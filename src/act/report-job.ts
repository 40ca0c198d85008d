// A Job reported, not failed: its Event, then the annotation that says it was reported (so the
// next sweep does not report it again).
import type { Decision } from '../judge/types.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { tryWrite } from '../kube/write-outcome.ts';
import { ANNOTATIONS } from '../policy/annotations.ts';
import { rfc3339Seconds } from './claim.ts';
import { stuckJobEvent, type Reporter } from './events.ts';
import { notLanded, type WriteResult } from './write-result.ts';

export async function reportJob(gateway: KubeGateway, d: Decision, reporter: Reporter): Promise<WriteResult> {
  const job = d.jobView!;
  // Healing on: the registry host the outage breaker holds the Job for (judge/heal-evidence.ts).
  const held = d.outageHold === undefined ? {} : { [ANNOTATIONS.outageHeld]: d.outageHold };
  if (job.annotations[ANNOTATIONS.reportedAt] !== undefined) {
    if (d.outageHold === undefined) return { kind: 'done', error: undefined };
    const marked = await tryWrite('update', () => gateway.mergePatchJob(job.namespace, job.name, { metadata: { annotations: held } }));
    return marked.landed ? { kind: 'done', error: undefined } : notLanded(marked);
  }
  const event = stuckJobEvent(d, 'Report', reporter);
  const written = await tryWrite('create', () => gateway.createEvent(job.namespace, event));
  if (!written.landed) return notLanded(written);
  const annotations = { [ANNOTATIONS.reportedAt]: rfc3339Seconds(reporter.now), ...held };
  const marked = await tryWrite('update', () => gateway.mergePatchJob(job.namespace, job.name, { metadata: { annotations } }));
  return marked.landed ? { kind: 'done', error: undefined } : notLanded(marked);
}
