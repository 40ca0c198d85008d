import { describeApiError } from '../kube/errors.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { kueueTimeoutWarning } from '../judge/queue.ts';
import { PULL_CLASSES } from '../model.ts';
import { readKueueTimeout, type KueueConfigLocation } from '../observe/kueue-timeout.ts';
import { ANNOTATIONS, ignoredByAnnotation } from '../policy/annotations.ts';
import type { LoadedPolicy } from '../policy/load.ts';
import { formatDuration } from '../policy/duration.ts';
import {
  describeGraceSource,
  explainRules,
  graceForJob,
  policyNeedsNamespaceLabels,
  resolveForNamespace,
  type RuleMatch,
} from '../policy/resolve.ts';
import type { EffectivePolicy, JobGrace } from '../policy/types.ts';
import type { OutputFormat } from '../report/logger.ts';
import { EXIT } from './exit.ts';

/** `policy explain`: the effective policy for one namespace (and Job), with where each value came from. */
export async function explainPolicy(
  out: NodeJS.WritableStream,
  gateway: KubeGateway | undefined,
  loaded: Extract<LoadedPolicy, { ok: true }>,
  namespace: string,
  jobName: string | undefined,
  format: OutputFormat,
  kueueConfig?: KueueConfigLocation,
): Promise<number> {
  const notes: string[] = [];
  let labels: Record<string, string> | undefined;
  if (gateway) {
    try {
      labels = { ...((await gateway.readNamespace(namespace)).metadata?.labels ?? {}) };
    } catch (error) {
      const f = describeApiError(error);
      notes.push(`could not read Namespace ${namespace} (${f.reason}: ${f.message}); label selectors see no labels`);
    }
  } else if (policyNeedsNamespaceLabels(loaded.policy)) {
    notes.push('no cluster connection: rules with namespaceSelector see no labels');
  }
  const ns = { name: namespace, labels: labels ?? {} };
  const { confirmWithinSeconds, forceDeleteAfterSeconds } = loaded.policy.limits;
  const effective = resolveForNamespace(loaded.policy, ns);
  const rules = explainRules(loaded.policy, ns);

  let job: JobExplanation | undefined;
  if (jobName) {
    if (!gateway) return fail(out, `--job needs a cluster connection`);
    try {
      const live = await gateway.readJob(namespace, jobName);
      job = explainJob(effective, jobName, { ...(live.metadata?.annotations ?? {}) });
    } catch (error) {
      const f = describeApiError(error);
      if (f.status === 404) return fail(out, `Job ${namespace}/${jobName} not found`, EXIT.invalid);
      return fail(out, `reading Job ${namespace}/${jobName}: ${f.reason}: ${f.message}`);
    }
  }

  // Kueue's timeout against these graces (docs/kueue.md): what was read, and each grace not shorter.
  const kueue = gateway ? await readKueueTimeout(gateway, kueueConfig) : undefined;
  const { grace, sources } = job?.grace ?? graceForJob(effective, {});
  const kueueWarnings = kueue?.timeout
    ? PULL_CLASSES.flatMap(
        (c) => kueueTimeoutWarning(c, { seconds: grace[c], from: describeGraceSource(sources[c]) }, kueue.timeout!) ?? [],
      )
    : [];

  if (format === 'json') {
    const kueueJson = kueue ? { timeoutSeconds: kueue.timeout?.seconds ?? null, read: kueue.said, warnings: kueueWarnings } : null;
    out.write(
      `${JSON.stringify({ policy: loaded.description, namespace, labels: labels ?? null, ...effective, rules, limits: loaded.policy.limits, job: job ? { name: job.name, ignored: job.ignored, grace: job.grace } : null, kueue: kueueJson, notes })}\n`,
    );
    return EXIT.ok;
  }
  const lines = [
    `Policy:      ${loaded.description}`,
    `Namespace:   ${namespace}${labels ? `  labels: ${formatLabels(labels)}` : ''}`,
    `Rule:        ${effective.rule}`,
    ...rules.map((r) => `  ${r.matched ? 'matches' : 'no match'}: ${r.rule}${describeMatchers(r)}`),
    `Action:      ${effective.action}  (from ${effective.sources.action})`,
    'Grace:',
    ...PULL_CLASSES.map((c) => `  ${c.padEnd(10)} ${formatDuration(effective.grace[c]).padEnd(8)} (from ${effective.sources.grace[c]})`),
    `Job overrides: ${effective.jobOverrides.allowed ? 'allowed' : 'not allowed'}, maxGrace ${formatDuration(effective.jobOverrides.maxGraceSeconds)}  (from ${effective.sources.jobOverrides})`,
    `Heal:        ${effective.heal ? "on: a stuck pod is recreated once its cause is gone, within its Job's budget" : 'off'}  (from ${effective.sources.heal})`,
    `Failed Jobs: confirmWithin ${formatDuration(confirmWithinSeconds)}, forceDeleteAfter ${forceDeleteAfterSeconds > 0 ? formatDuration(forceDeleteAfterSeconds) : '0 (never)'}  (limits, for every namespace)`,
  ];
  if (job) {
    const jobGrace = job.grace;
    lines.push(`Job:         ${job.name}${job.ignored ? `  (annotation ${ANNOTATIONS.ignore}=${job.ignoreValue}: never touched)` : ''}`);
    if (job.ignoreWarning) lines.push(`  warning: ${job.ignoreWarning}`);
    if (jobGrace.override) {
      lines.push(
        `  grace annotation ${formatDuration(jobGrace.override.requested)} → ${formatDuration(jobGrace.override.applied)} for every class${jobGrace.override.clamped ? ' (clamped to maxGrace)' : ''}`,
      );
    } else {
      lines.push('  no grace annotation in effect');
    }
    lines.push('  Grace for this Job:');
    for (const c of PULL_CLASSES) {
      lines.push(`    ${c.padEnd(10)} ${formatDuration(jobGrace.grace[c]).padEnd(8)} (from ${describeGraceSource(jobGrace.sources[c])})`);
    }
    for (const w of jobGrace.warnings) lines.push(`  warning: ${w}`);
  }
  if (kueue) lines.push(`Kueue:       ${kueue.said}`, ...kueueWarnings.map((w) => `  warning: ${w}`));
  for (const n of notes) lines.push(`Note: ${n}`);
  out.write(`${lines.join('\n')}\n`);
  return EXIT.ok;
}

export interface JobExplanation {
  name: string;
  /** The sweep's own predicate: the Job is never touched. */
  ignored: boolean;
  /** The annotation's value as written, when it ignores the Job. */
  ignoreValue: string | undefined;
  ignoreWarning: string | undefined;
  grace: JobGrace;
}

/** Pure: what the sweep makes of one Job's annotations under the namespace's effective policy. */
export function explainJob(effective: EffectivePolicy, name: string, annotations: Record<string, string>): JobExplanation {
  const ignore = ignoredByAnnotation(annotations);
  return {
    name,
    ignored: ignore.ignored,
    ignoreValue: ignore.ignored ? annotations[ANNOTATIONS.ignore] : undefined,
    ignoreWarning: ignore.warning,
    grace: graceForJob(effective, annotations),
  };
}

function describeMatchers(r: RuleMatch): string {
  const parts = [
    r.namespaces === undefined ? undefined : `namespaces ${r.namespaces ? 'yes' : 'no'}`,
    r.namespaceSelector === undefined ? undefined : `namespaceSelector ${r.namespaceSelector ? 'yes' : 'no'}`,
    r.owners === undefined ? undefined : `owners ${r.owners.join(', ')}: their pods only, never a Job's`,
  ].filter(Boolean);
  return parts.length > 0 ? ` (${parts.join(', ')})` : ' (matches every namespace)';
}

function formatLabels(labels: Record<string, string>): string {
  const entries = Object.entries(labels);
  return entries.length === 0 ? '(none)' : entries.map(([k, v]) => `${k}=${v}`).join(',');
}

function fail(out: NodeJS.WritableStream, message: string, code: number = EXIT.unreachable): number {
  out.write(`imagepull-sweeper: ${message}\n`);
  return code;
}
