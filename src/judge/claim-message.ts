// The claim message: the text of the `imagepull-sweeper/message` annotation (and of the Event
// notes), written when a Job is claimed and read back by a later sweep that finds the Job pending
// with no stuck pod left. Its format and its parse live here together.
import { reasonNote } from '../classify/index.ts';
import { PULL_CLASSES, type ContainerKind, type PullClass } from '../model.ts';
import { formatDuration } from '../policy/duration.ts';
import { describeGraceSource } from '../policy/resolve.ts';
import { describeCapacity } from './capacity.ts';
import { hintFor } from './hint.ts';
import type { Decision } from './types.ts';

export function formatClaimMessage(d: Decision): string {
  const from = d.graceSource ? ` from ${describeGraceSource(d.graceSource)}` : '';
  const spent = `${d.spentBy ? `, ${d.spentBy}` : ''}${d.queued ? `, ${d.queued}` : ''}`;
  const grace = d.graceSeconds === undefined ? '' : `, grace ${formatDuration(d.graceSeconds)}${from}${spent}`;
  const pods = d.stuckPods > 1 ? ` (${d.stuckPods} pods stuck)` : '';
  // Before the registry's message, so the Event's size limit never cuts it.
  const held = describeCapacity(d.capacity);
  const capacity = held ? `; ${d.plan === 'fail' ? 'frees' : 'holds'} ${held}` : '';
  const volume = d.volume === undefined ? '' : ` of volume ${d.volume}`;
  const owners = d.owners.length > 0 ? `; owners ${d.owners.join(', ')}` : '';
  const note = reasonNote(d.reason, d.message);
  // The hint and the fallback before the kubelet's words, so a size limit cuts only those.
  const fallback = d.fallback ? ` ${describeFallback(d)}.` : '';
  return (
    `${d.containerKind} container ${d.container} of pod ${d.pod}${pods} waited ${formatDuration(d.stuckSeconds)} ` +
    `on image ${d.image}${volume} (class ${d.pullClass}, rule ${d.rule}${grace}${capacity}${owners}): ` +
    `${hintFor(d)}.${fallback} ${d.reason}${note ? ` (${note})` : ''}: ${d.message}`
  );
}

const FALLBACK_WORDS: Readonly<Record<string, string>> = {
  activeDeadlineSeconds: 'its deadline (activeDeadlineSeconds)',
  podFailurePolicy: 'its pod failure policy',
};

/** `Failed by its deadline (activeDeadlineSeconds), not by its own condition: <why>`. */
export function describeFallback(d: Pick<Decision, 'mechanism' | 'fallback'>): string {
  return `Failed by ${FALLBACK_WORDS[d.mechanism ?? ''] ?? d.mechanism}, not by its own condition: ${d.fallback}`;
}

/** What a claim message says of the stuck container; undefined when it is not one. */
export interface ClaimMessage {
  containerKind: ContainerKind;
  container: string;
  pod: string;
  image: string;
  /** The image volume whose reference `image` is, when it was one. */
  volume?: string;
  /** `unknown` when the class named is not one (an older or edited message). */
  pullClass: PullClass;
  rule: string;
}

const MESSAGE =
  /^(init|sidecar|regular) container (\S+) of pod (\S+)(?: \(\d+ pods stuck\))? waited \S+ on image (\S+)(?: of volume (\S+))? \(class (\w+), rule ([^,;)]+)/;

export function parseClaimMessage(text: string): ClaimMessage | undefined {
  const m = MESSAGE.exec(text);
  if (!m) return undefined;
  const pullClass = (PULL_CLASSES as readonly string[]).includes(m[6]!) ? (m[6] as PullClass) : 'unknown';
  return {
    containerKind: m[1] as ContainerKind,
    container: m[2]!,
    pod: m[3]!,
    image: m[4]!,
    ...(m[5] ? { volume: m[5] } : {}),
    pullClass,
    rule: m[7]!,
  };
}
