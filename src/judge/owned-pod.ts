// A stuck pod whose controller is not a Job, under an `owners` rule (docs/contract.md, "Owners
// other than a Job"): judged like a Job, by its own `imagepull-sweeper/` annotations, and failed
// through its own spec.activeDeadlineSeconds. Without such a rule it is only reported. Pure.
import { formatOwners, type OwnerRef, type StuckContainer } from '../model.ts';
import { ANNOTATIONS, ignoredByAnnotation } from '../policy/annotations.ts';
import { ownerKindOf } from '../policy/owners.ts';
import { graceForJob, ownersRuleFor, resolveForNamespace, type NamespaceInput } from '../policy/resolve.ts';
import type { Policy } from '../policy/types.ts';
import { judgeAgainstGrace, makeDecision, mostOverdue } from './decision.ts';
import type { Decision, OutageAssessment } from './types.ts';

/** The decision on a pod without a Job that an `owners` rule covers; undefined when none does. */
export function decideOwnedPod(
  containers: StuckContainer[],
  controller: OwnerRef | undefined,
  ns: NamespaceInput,
  input: { policy: Policy; now: Date },
  outage: OutageAssessment,
): Decision | undefined {
  const kind = ownerKindOf(controller);
  if (!ownersRuleFor(input.policy, ns, kind)) return undefined;
  const effective = resolveForNamespace(input.policy, ns, kind);
  const annotations = containers[0]!.podAnnotations ?? {};
  const grace = graceForJob(effective, annotations);
  const worst = mostOverdue(containers, grace.grace, input.now);
  const owners = controller ? formatOwners([controller]) : [];
  const base = { rule: effective.rule, action: effective.action, job: undefined, owners };
  const leave = (detail: string, action = effective.action): Decision =>
    makeDecision(worst, input.now, { ...base, action, plan: 'skip', detail });

  const failedAt = annotations[ANNOTATIONS.failedAt];
  if (failedAt !== undefined) return leave(`already failed by imagepull-sweeper at ${failedAt} (its deadline passed; the kubelet ends it)`);
  const ignore = ignoredByAnnotation(annotations);
  if (ignore.ignored) return leave(ignore.warning ?? `annotation ${ANNOTATIONS.ignore}=true`, 'ignore');
  if (effective.action === 'ignore') return leave(`rule ${effective.rule}: action ignore`);
  const who = controller ? `${controller.kind} ${controller.name}` : 'no controller';
  return judgeAgainstGrace(worst, input.now, outage, {
    base,
    effective,
    grace,
    annotations,
    failing: { mechanism: 'podActiveDeadlineSeconds', failJobCondition: undefined, note: `; pod of ${who}, by its own deadline` },
  });
}
