// Finds the containers of a pod that wait on their image, and since when they could have pulled it.

import type { V1Container, V1ContainerStatus, V1OwnerReference, V1Pod, V1PodCondition } from '@kubernetes/client-node';
import {
  isHealableClass,
  isStalledReason,
  isStuckReason,
  type ContainerKind,
  type HealFacts,
  type OwnerRef,
  type PullClass,
  type StuckContainer,
} from '../model.ts';
import { toDate } from '../time.ts';
import { failingReference, hasImageVolumes } from './image-volume.ts';
import { classifyPullFailure } from './pull-class.ts';
import { containerThatRan } from './ran.ts';

export { toDate, type Timestamp } from '../time.ts';

/** The prefix of the product's annotations (policy/annotations.ts, which later stages own). */
const SWEEPER_PREFIX = 'imagepull-sweeper/';

function latest(...dates: (Date | undefined)[]): Date | undefined {
  let out: Date | undefined;
  for (const d of dates) if (d && (!out || d.getTime() > out.getTime())) out = d;
  return out;
}

function earliest(...dates: (Date | undefined)[]): Date | undefined {
  let out: Date | undefined;
  for (const d of dates) if (d && (!out || d.getTime() < out.getTime())) out = d;
  return out;
}

/**
 * The longest the kubelet waits before it restarts an exited container (its crash back-off: 10 s
 * doubling to 5 min; `crashLoopBackOff.maxContainerRestartPeriod` may only lower it). The pull of
 * a restart starts no earlier than that after the exit, except after a container's first exit,
 * which the kubelet restarts at once (docs/clock.md, "A container restarted in place").
 */
export const MAX_CRASH_BACK_OFF_MS = 300_000;

/** Not being deleted and not finished. */
export function isActivePod(pod: V1Pod): boolean {
  if (pod.metadata?.deletionTimestamp) return false;
  const phase = pod.status?.phase;
  return phase !== 'Succeeded' && phase !== 'Failed';
}

/**
 * An object's controller reference: the only owner reference attribution follows (a pod or Job
 * may carry others, e.g. a PodGroup of the 1.36+ workload API, which control nothing).
 */
export function controllerRefOf(meta: { ownerReferences?: V1OwnerReference[] } | undefined): OwnerRef | undefined {
  const ref = meta?.ownerReferences?.find((o) => o.controller === true);
  if (!ref) return undefined;
  return { apiVersion: ref.apiVersion, kind: ref.kind, name: ref.name, uid: ref.uid, controller: true };
}

export function controllerOf(pod: V1Pod): OwnerRef | undefined {
  return controllerRefOf(pod.metadata);
}

function isTrue(pod: V1Pod, type: string): boolean {
  return pod.status?.conditions?.some((x) => x.type === type && x.status === 'True') ?? false;
}

function trueSince(pod: V1Pod, type: string): Date | undefined {
  const c: V1PodCondition | undefined = pod.status?.conditions?.find((x) => x.type === type);
  return c?.status === 'True' ? toDate(c.lastTransitionTime) : undefined;
}

function podFallback(pod: V1Pod): Date | undefined {
  return toDate(pod.status?.startTime) ?? toDate(pod.metadata?.creationTimestamp);
}

/**
 * The longest a pod's first sandbox may take to come up and still be waited for: no container
 * pulls before its sandbox is up, but the kubelet sets `PodReadyToStartContainers` True again,
 * later, when it recreates the sandbox, so the clock trusts the condition's time only this long
 * after the pod's start. Also the most such a reset moves the clock (docs/clock.md).
 */
export const SANDBOX_SET_UP_BOUND_MS = 30_000;

/** Since when the pod's sandbox is up, at most SANDBOX_SET_UP_BOUND_MS after the pod's start. */
function sandboxUpSince(pod: V1Pod): Date | undefined {
  const up = trueSince(pod, 'PodReadyToStartContainers');
  const start = podFallback(pod);
  if (!up || !start) return up;
  return earliest(up, new Date(start.getTime() + SANDBOX_SET_UP_BOUND_MS));
}

/** The earliest start of these containers that their statuses still show (current or last state). */
function earliestStart(statuses: readonly V1ContainerStatus[] | undefined): Date | undefined {
  let out: Date | undefined;
  for (const s of statuses ?? []) {
    out = earliest(
      out,
      toDate(s.state?.running?.startedAt),
      toDate(s.state?.terminated?.startedAt),
      toDate(s.lastState?.terminated?.startedAt),
    );
  }
  return out;
}

/**
 * Since when the pod has been initialized, at the earliest the status shows it, so that a
 * condition reset and set again (init containers run again in a recreated sandbox) does not move
 * it: `Initialized` True; a regular container's start (they start only once it is); the last
 * init container's earlier successful run.
 */
function initializedSince(pod: V1Pod): Date | undefined {
  const since = trueSince(pod, 'Initialized');
  if (!since) return undefined;
  const last = pod.spec?.initContainers?.at(-1);
  const lastStatus = last && initKind(last) === 'init' ? pod.status?.initContainerStatuses?.find((s) => s.name === last.name) : undefined;
  const ranBefore = lastStatus?.lastState?.terminated?.exitCode === 0 ? toDate(lastStatus.lastState.terminated.finishedAt) : undefined;
  return earliest(since, earliestStart(pod.status?.containerStatuses), ranBefore);
}

/** When the sidecar or init container before this one let it start, if the status still shows it. */
function predecessorDone(kind: ContainerKind | undefined, status: V1ContainerStatus | undefined): Date | undefined {
  if (!kind || !status) return undefined;
  if (kind === 'sidecar') {
    // After a restart `startedAt` is the latest start, later than when the next one could begin.
    return status.restartCount === 0 ? toDate(status.state?.running?.startedAt) : undefined;
  }
  // An earlier successful run (before the pod's sandbox was recreated and the init containers ran again).
  const before = status.lastState?.terminated?.exitCode === 0 ? toDate(status.lastState.terminated.finishedAt) : undefined;
  return earliest(toDate(status.state?.terminated?.finishedAt), before);
}

/**
 * The earliest a container restarted in place can have started pulling again: its last exit,
 * plus the crash back-off the kubelet may have waited unless this was its first exit.
 */
function restartPullFrom(status: V1ContainerStatus): Date | undefined {
  const exited = toDate(status.lastState?.terminated?.finishedAt);
  if (!exited || !status.restartCount) return exited;
  return new Date(exited.getTime() + MAX_CRASH_BACK_OFF_MS);
}

interface Slot {
  status: V1ContainerStatus;
  spec: V1Container;
  kind: ContainerKind;
  /** The init container before this one (init and sidecar only). */
  previous?: { kind: ContainerKind; status: V1ContainerStatus | undefined };
}

/** Cheap test run on every Pending pod of the cluster before any per-container work. */
function hasStuckStatus(pod: V1Pod): boolean {
  const sandboxReady = isTrue(pod, 'PodReadyToStartContainers');
  const waitingOnImage = (s: V1ContainerStatus): boolean => {
    const reason = s.state?.waiting?.reason;
    return isStuckReason(reason) || (sandboxReady && isStalledReason(reason));
  };
  return (pod.status?.containerStatuses ?? []).some(waitingOnImage) || (pod.status?.initContainerStatuses ?? []).some(waitingOnImage);
}

/**
 * A container waiting to be created is stalled when nothing but its image holds it: the sandbox
 * is up (`PodReadyToStartContainers`) and its turn has come (a regular container: `Initialized`;
 * an init or sidecar container: the one before it finished or started, or it is the first).
 */
function isStalled(pod: V1Pod, slot: Slot): boolean {
  if (!isTrue(pod, 'PodReadyToStartContainers')) return false;
  if (slot.kind === 'regular') return isTrue(pod, 'Initialized');
  return !slot.previous || predecessorDone(slot.previous.kind, slot.previous.status) !== undefined;
}

function initKind(spec: V1Container): ContainerKind {
  return spec.restartPolicy === 'Always' ? 'sidecar' : 'init';
}

/**
 * One slot per container named in the spec that has a status in the matching list. A status
 * for a name the spec does not have (in that list) is not the kubelet's and is never judged.
 * Ephemeral containers are not judged (docs/contract.md: init, regular and sidecar containers).
 */
function slotsOf(pod: V1Pod): Slot[] {
  const initSpecs = pod.spec?.initContainers ?? [];
  const statusByName = new Map((pod.status?.initContainerStatuses ?? []).map((s) => [s.name, s]));
  const slots: Slot[] = [];
  // Spec order decides who comes before whom.
  initSpecs.forEach((spec, i) => {
    const status = statusByName.get(spec.name);
    if (!status) return;
    const prev = i > 0 ? initSpecs[i - 1] : undefined;
    const previous = prev ? { kind: initKind(prev), status: statusByName.get(prev.name) } : undefined;
    slots.push({ status, spec, kind: initKind(spec), ...(previous ? { previous } : {}) });
  });
  const specs = new Map((pod.spec?.containers ?? []).map((c) => [c.name, c]));
  for (const status of pod.status?.containerStatuses ?? []) {
    const spec = specs.get(status.name);
    if (spec) slots.push({ status, spec, kind: 'regular' });
  }
  return slots;
}

/**
 * When this container's turn to pull came, from pod status only (docs/clock.md), the latest of:
 * - its turn in the pod: regular, the pod `Initialized` (or a regular container started);
 *   init/sidecar, the previous init container's `finishedAt` (sidecar: `startedAt`); else
 *   `status.startTime`, else `creationTimestamp`; each at the earliest the status shows, so that
 *   a reset cannot move it later;
 * - the sandbox up (`PodReadyToStartContainers`), trusted up to SANDBOX_SET_UP_BOUND_MS after the
 *   pod's start, so that a reset moves the clock at most that much, and only later;
 * - a container restarted in place: its last exit (plus the kubelet's longest crash back-off
 *   after any exit but the first).
 */
function pullStartedAt(pod: V1Pod, slot: Slot): Date | undefined {
  const base =
    (slot.kind === 'regular' ? initializedSince(pod) : predecessorDone(slot.previous?.kind, slot.previous?.status)) ?? podFallback(pod);
  if (!base) return undefined;
  return latest(base, sandboxUpSince(pod), restartPullFrom(slot.status));
}

/** Only the `imagepull-sweeper/` annotations of a pod (its owner's controls and the sweeper's marks), if any. */
function sweeperAnnotations(pod: V1Pod): Record<string, string> | undefined {
  const annotations = pod.metadata?.annotations;
  if (!annotations) return undefined;
  let out: Record<string, string> | undefined;
  for (const k of Object.keys(annotations)) if (k.startsWith(SWEEPER_PREFIX)) (out ??= {})[k] = annotations[k]!;
  return out;
}

/**
 * Every init, sidecar and regular container of an active pod whose waiting reason is a stuck
 * reason, or that is stalled (class `stalled`, see isStalled); only containers the spec names
 * (see slotsOf). A container with no determinable start time (no condition, startTime or
 * creationTimestamp — never the case for a pod read from the API server) is left out rather
 * than guessed.
 *
 * In a `Running` pod (a container restarted in place, docs/how-it-works.md) a sidecar is never
 * stuck: once the pod is initialized, sidecars hold nothing up; the pod completes when its regular
 * containers do, and the kubelet then stops its sidecars, whatever they wait for.
 */
export function findStuckContainers(pod: V1Pod): StuckContainer[] {
  if (!isActivePod(pod) || !hasStuckStatus(pod)) return [];
  const controller = controllerOf(pod);
  const own = sweeperAnnotations(pod);
  // Only a pod with image volumes can fail on another reference than a container's own image.
  const imageVolumes = hasImageVolumes(pod);
  const running = pod.status?.phase === 'Running';
  const out: StuckContainer[] = [];
  let facts: HealFacts | undefined;
  for (const slot of slotsOf(pod)) {
    if (running && slot.kind === 'sidecar') continue;
    const waiting = slot.status.state?.waiting;
    const reason = waiting?.reason;
    if (!isStuckReason(reason) && !(isStalledReason(reason) && isStalled(pod, slot))) continue;
    const stuckSince = pullStartedAt(pod, slot);
    if (!stuckSince) continue;
    const message = waiting?.message ?? '';
    let image = slot.status.image || slot.spec.image || '';
    let volume: string | undefined;
    if (imageVolumes) ({ image, volume } = failingReference(pod, slot.spec, image, message));
    const pullClass: PullClass = isStuckReason(reason) ? classifyPullFailure(reason, message, image) : 'stalled';
    // One literal without spreads (V8 keeps the fields after a spread in a separate, growing
    // array: more heap per stuck container); the rare fields are set after it.
    const stuck: StuckContainer = {
      namespace: pod.metadata?.namespace ?? '',
      pod: pod.metadata?.name ?? '',
      podUid: pod.metadata?.uid ?? '',
      podResourceVersion: pod.metadata?.resourceVersion ?? '',
      container: slot.status.name,
      containerKind: slot.kind,
      image,
      reason,
      message,
      pullClass,
      stuckSince,
      controller: controller ? { ...controller } : undefined,
    };
    if (volume !== undefined) stuck.volume = volume;
    if (own) stuck.podAnnotations = { ...own };
    if (isHealableClass(pullClass)) stuck.heal = facts ??= healFacts(pod);
    out.push(stuck);
  }
  return out;
}

/** The Job's per-index failure count the Job controller writes on each pod (backoffLimitPerIndex). */
const INDEX_FAILURE_COUNT = 'batch.kubernetes.io/job-index-failure-count';

/** Shared by most pods: never started, no index failures, the `default` ServiceAccount, no pull secrets. */
const PLAIN: HealFacts = Object.freeze({});

/**
 * What healing judges a pod on (judge/heal.ts), one object per pod (read as: ServiceAccount
 * `default`, no pull secrets, unless it says otherwise).
 */
function healFacts(pod: V1Pod): HealFacts {
  const ran = containerThatRan(pod);
  const count = Number(pod.metadata?.annotations?.[INDEX_FAILURE_COUNT] ?? 0);
  const secrets = (pod.spec?.imagePullSecrets ?? []).map((s) => s.name ?? '').filter((n) => n !== '');
  const serviceAccount = pod.spec?.serviceAccountName ?? 'default';
  const failures = Number.isInteger(count) && count > 0 ? count : undefined;
  if (!ran && failures === undefined && secrets.length === 0 && serviceAccount === 'default') return PLAIN;
  const facts: HealFacts = {};
  if (serviceAccount !== 'default') facts.serviceAccount = serviceAccount;
  if (secrets.length > 0) facts.pullSecrets = secrets;
  if (ran) facts.ran = ran;
  if (failures !== undefined) facts.indexFailures = failures;
  return facts;
}
