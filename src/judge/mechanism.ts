// Which way a Job is failed (docs/contract.md "How a Job is failed"). Pure.
//
// The podFailurePolicy path adds a condition to the stuck pod and deletes it. The kubelet then
// leaves the pod `Failed` with every container terminated (exit code 137, ContainerStatusUnknown),
// and the Job controller applies the FIRST rule of the Job's podFailurePolicy that matches that
// pod. The path is taken only when that rule is a FailJob rule on the added condition; any rule
// that matches (or might match) earlier would swallow the verdict, so the deadline is used.
import type { JobView, PodFailureRule } from '../model.ts';
import type { FailMechanism } from './types.ts';

/** Exit code and reason the kubelet gives containers of a pod deleted while waiting. */
export const KILLED_EXIT_CODE = 137;

/** Conditions of the pod the kubelet leaves behind, as far as they are certain. */
const LEFT_BEHIND: Readonly<Record<string, string>> = {
  PodScheduled: 'True',
  PodReadyToStartContainers: 'False',
  ContainersReady: 'False',
  Ready: 'False',
};
/** Conditions that may or may not be there, or with either status. */
const UNCERTAIN = new Set(['Initialized', 'DisruptionTarget']);
/** Condition types the kubelet owns: the sweeper must not add them. */
const KUBELET_OWNED = new Set([...Object.keys(LEFT_BEHIND), 'Initialized']);

type Match = 'yes' | 'maybe' | 'no';

export type MechanismChoice =
  | { mechanism: Extract<FailMechanism, 'podFailurePolicy'>; conditionType: string; why: string }
  | { mechanism: Extract<FailMechanism, 'activeDeadlineSeconds'>; conditionType: undefined; why: string };

export function chooseMechanism(job: Pick<JobView, 'podFailureRules' | 'containerNames'>): MechanismChoice {
  const rules = job.podFailureRules;
  let shadowed: string | undefined;
  for (const [index, rule] of rules.entries()) {
    if (rule.action !== 'FailJob') continue;
    for (const pattern of rule.onPodConditions ?? []) {
      if (pattern.status !== 'True' || KUBELET_OWNED.has(pattern.type)) continue;
      const first = rules.findIndex((r, i) => i <= index && matches(r, job.containerNames, pattern.type) !== 'no');
      if (first === index) {
        return {
          mechanism: 'podFailurePolicy',
          conditionType: pattern.type,
          why: `podFailurePolicy rule ${index + 1} (FailJob on ${pattern.type})`,
        };
      }
      shadowed ??= `podFailurePolicy rule ${first + 1} (${describeRule(rules[first]!)}) would match the deleted pod before rule ${index + 1} (FailJob on ${pattern.type})`;
    }
  }
  return {
    mechanism: 'activeDeadlineSeconds',
    conditionType: undefined,
    why: shadowed ?? 'no podFailurePolicy FailJob rule on a pod condition',
  };
}

/** Whether `rule` matches the pod the kubelet leaves after the sweeper added `added` and deleted it. */
export function matches(rule: PodFailureRule, containerNames: readonly string[], added: string): Match {
  let result: Match = 'no';
  if (rule.onExitCodes) result = better(result, matchesExitCodes(rule.onExitCodes, containerNames));
  for (const pattern of rule.onPodConditions ?? []) result = better(result, matchesCondition(pattern, added));
  return result;
}

function matchesExitCodes(req: NonNullable<PodFailureRule['onExitCodes']>, containerNames: readonly string[]): Match {
  // Every container ends with 137 (the Job controller ignores exit code 0, which none has here).
  if (req.containerName !== undefined && !containerNames.includes(req.containerName)) return 'no';
  const listed = req.values.includes(KILLED_EXIT_CODE);
  if (req.operator === 'In') return listed ? 'yes' : 'no';
  if (req.operator === 'NotIn') return listed ? 'no' : 'yes';
  return 'maybe';
}

function matchesCondition(pattern: { type: string; status: string }, added: string): Match {
  if (pattern.type === added) return pattern.status === 'True' ? 'yes' : 'no';
  const known = LEFT_BEHIND[pattern.type];
  if (known !== undefined) return known === pattern.status ? 'yes' : 'no';
  return UNCERTAIN.has(pattern.type) ? 'maybe' : 'no';
}

function better(a: Match, b: Match): Match {
  return a === 'yes' || b === 'yes' ? 'yes' : a === 'maybe' || b === 'maybe' ? 'maybe' : 'no';
}

export function describeRule(rule: PodFailureRule): string {
  const on: string[] = [];
  if (rule.onExitCodes) {
    const c = rule.onExitCodes;
    on.push(`exit code ${c.operator} [${c.values.join(', ')}]${c.containerName ? ` of ${c.containerName}` : ''}`);
  }
  for (const p of rule.onPodConditions ?? []) on.push(`${p.type}=${p.status}`);
  return `${rule.action} on ${on.join(' or ') || 'nothing'}`;
}
