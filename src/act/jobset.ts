// Before a Job of a JobSet is failed, the JobSet is told what the sweeper failed it on (its
// annotation imagepull-sweeper/spent, one conditional merge patch): the restart that failure
// causes then finds its grace already spent (docs/jobset.md). Written first, so a sweep killed
// between the two writes still leaves the memory behind; the Job's failure is completed by the
// next sweep as any other.
import { rememberSpent } from '../judge/jobset.ts';
import type { Decision } from '../judge/types.ts';
import { describeApiError } from '../kube/errors.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { failureText, tryWrite } from '../kube/write-outcome.ts';
import { ANNOTATIONS } from '../policy/annotations.ts';
import { rfc3339Seconds } from './claim.ts';
import type { WriteResult } from './write-result.ts';

/** Records the failure on the Job's JobSet; resolves to what went wrong, or undefined. */
export async function rememberOnJobSet(gateway: KubeGateway, d: Decision, now: Date, maxConflicts = 3): Promise<string | undefined> {
  const member = d.jobView?.jobSet;
  if (!member) return undefined;
  for (let conflicts = 0; ; conflicts += 1) {
    let meta;
    try {
      meta = (await gateway.readJobSet(d.namespace, member.name)).metadata ?? {};
    } catch (error) {
      const failure = describeApiError(error);
      return failure.status === 404 ? undefined : `could not read JobSet ${member.name}: ${failure.message}`;
    }
    if (meta.uid !== member.uid) return undefined;
    const value = rememberSpent(meta.annotations?.[ANNOTATIONS.jobSetSpent], d, rfc3339Seconds(now));
    if (value === undefined) return undefined;
    const patch = { metadata: { resourceVersion: meta.resourceVersion, annotations: { [ANNOTATIONS.jobSetSpent]: value } } };
    const patched = await tryWrite('update', () => gateway.mergePatchJobSet(d.namespace, member.name, patch));
    if (patched.landed || patched.why === 'gone') return undefined;
    if (patched.why === 'conflict' && conflicts < maxConflicts) continue;
    return `could not annotate JobSet ${member.name}: ${failureText(patched.failure)}`;
  }
}

/** `fail` (the Job's failure), after the JobSet remembers it; a memory not written is said in the result. */
export async function failJobOfJobSet(
  gateway: KubeGateway,
  d: Decision,
  now: Date,
  fail: () => Promise<WriteResult>,
): Promise<WriteResult> {
  const missed = await rememberOnJobSet(gateway, d, now);
  const written = await fail();
  if (!missed || written.kind !== 'done') return written;
  const memory = `${missed}; its restarts get a full grace`;
  return { ...written, error: written.error ? `${written.error}; ${memory}` : `Job failed, but ${memory}` };
}
