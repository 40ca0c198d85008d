// The sweep's log lines beside its audit: what the policy fell back to, what the reads found that
// an operator should know (lookups that failed, nodes it cannot see into), what settling earlier
// failures did, and why a sweep changed nothing.
import type winston from 'winston';
import type { PolicyProblem } from '../policy/types.ts';
import { SANDBOX_SET_UP_BOUND_MS } from '../classify/stuck.ts';
import { SYSTEM_NAMESPACES } from '../policy/defaults.ts';
import { formatProblem } from '../policy/problems.ts';

const SANDBOX_CONDITION_MISSING =
  'the kubelet of these nodes writes no PodReadyToStartContainers condition (feature gate PodReadyToStartContainersCondition off, ' +
  'possible before Kubernetes 1.37): pulls that hang without an error are not detected on them, and the stuck time of a pull error counts from before its sandbox was up';
// The longest a sandbox's set-up is taken as normal: the stuck clock's bound too (docs/clock.md).
const SANDBOX_WAIT_WARN_MS = SANDBOX_SET_UP_BOUND_MS;
const SANDBOX_NOT_READY =
  `pods have waited over ${SANDBOX_WAIT_WARN_MS / 1000} s for their sandbox (PodReadyToStartContainers False) with containers still to be created: either the sandbox ` +
  'does not come up, or, on a kubelet before Kubernetes 1.36 (which marks the sandbox ready only after the image pull), their pull hangs ' +
  'without an error; the sweeper cannot tell which and does not act on them';
export const NO_SERVER_DATE =
  'no answer of the API server carried a Date header (does a proxy in between strip it?), so its clock is unknown';

/** The sweep's log lines, each carrying its sweepId. */
export class SweepLog {
  constructor(
    readonly logger: winston.Logger,
    readonly sweepId: string,
  ) {}

  /** The built-in defaults in use, and the policy's warnings (`source`: policy/load.ts problemSource). */
  policyLoaded(loaded: { builtin: boolean; description: string; warnings: readonly PolicyProblem[] }, source: string): void {
    if (loaded.builtin) {
      this.warn(
        `policy: ${loaded.description}: sweeping on the built-in defaults (ignore ${SYSTEM_NAMESPACES.join(', ')}; default grace elsewhere); ` +
          'create the ConfigMap, or name one with --policy-configmap',
      );
    }
    for (const w of loaded.warnings) this.warn(`policy warning: ${formatProblem(source, w)}`);
  }

  /** A paged list started over after its continue token expired (410 Gone); `what`: `pod list`, ... */
  listRestarted(what: string): (namespace: string | undefined, restart: number) => void {
    return (namespace, restart) =>
      this.warn(`${what} continue token expired; listing again from the start`, { namespace: namespace ?? '*', restart });
  }

  /** What the reads after the pod list found; counts the failures outside the decisions. */
  observed(o: {
    tooOld: string | undefined;
    nodesWithoutSandboxCondition: ReadonlySet<string>;
    unreadableNamespaces: ReadonlyMap<string, string>;
    pendingListError: { label: string; message: string } | undefined;
  }): number {
    if (o.tooOld) this.warn(o.tooOld);
    const blind = [...o.nodesWithoutSandboxCondition].sort();
    if (blind.length > 0) this.warn(SANDBOX_CONDITION_MISSING, { nodes: blind });
    for (const [namespace, message] of o.unreadableNamespaces) this.error('could not read Namespace labels', { namespace, error: message });
    if (!o.pendingListError) return 0;
    this.error(`could not list the Jobs labelled ${o.pendingListError.label}; they are checked on the next sweep`, {
      error: o.pendingListError.message,
    });
    return 1;
  }

  /** The Job reads that failed (a part's, in a sweep of many stuck Jobs): their decisions say so too. */
  unreadJobs(errors: readonly { namespace: string; job: string; message: string }[]): void {
    for (const e of errors) this.error('could not read Job', { namespace: e.namespace, job: e.job, error: e.message });
  }

  /** Pods waiting long for their sandbox, judged on the server's clock. */
  sandboxWaits(waits: readonly { namespace: string; pod: string; node: string; since: Date }[], now: Date): void {
    const slow = waits.filter((w) => now.getTime() - w.since.getTime() > SANDBOX_WAIT_WARN_MS);
    if (slow.length === 0) return;
    const pods = slow.map((w) => `${w.namespace}/${w.pod}`);
    this.warn(SANDBOX_NOT_READY, { pods, nodes: [...new Set(slow.map((w) => w.node))].sort() });
  }

  /**
   * The pending Jobs found finished, and what settling them did; counts the failures. A dry run
   * wrote nothing it would report (the finished Jobs are settled by the next real sweep), but a
   * write the API server refused (a server dry run) is an error as in a real sweep.
   */
  settled(
    settled: readonly { job: { namespace: string; name: string }; eventWritten: boolean; error: string | undefined }[],
    dryRun: boolean,
  ): number {
    let errors = 0;
    for (const s of settled) {
      const fields = { namespace: s.job.namespace, job: s.job.name };
      if (s.error) {
        errors += 1;
        this.error(`Job failed by an earlier sweep: ${s.error}; tried again next sweep`, fields);
      } else if (s.eventWritten && !dryRun) this.info('wrote the missing FailJob Event of a Job failed by an earlier sweep', fields);
    }
    return errors;
  }

  stopped(): void {
    this.warn('sweep stopped by a signal: writes in flight finished, none started after');
  }

  /** The policy could not be used: each problem, then the verdict. */
  invalidPolicy(description: string, problems: readonly string[]): void {
    for (const problem of problems) this.error(`invalid policy: ${problem}`);
    this.error(`policy ${description} is invalid; nothing was changed`, { problems: problems.length });
  }

  invalidPolicyEvent(written: { written: true; already: boolean; name: string | undefined } | { written: false; error: string }): void {
    if (!written.written) this.error('could not write the InvalidPolicy Event', { error: written.error });
    else if (written.already) this.info('the InvalidPolicy Event for these problems was already emitted', { event: written.name });
  }

  /** Nothing was changed, and why (an error line). */
  nothingChanged(why: string): void {
    this.error(`${why}; nothing was changed`);
  }

  info(message: string, fields: Record<string, unknown> = {}): void {
    this.logger.info(message, { sweepId: this.sweepId, ...fields });
  }
  warn(message: string, fields: Record<string, unknown> = {}): void {
    this.logger.warn(message, { sweepId: this.sweepId, ...fields });
  }
  error(message: string, fields: Record<string, unknown> = {}): void {
    this.logger.error(message, { sweepId: this.sweepId, ...fields });
  }
}
