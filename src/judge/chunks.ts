// The order a sweep of many stuck Jobs judges them in, and its parts, pure: a part's Job views,
// containers and decisions are all a sweep holds at once (docs/how-it-works.md "Sweeping in parts").
import { compareText } from '../order.ts';
import type { StuckContainer } from '../model.ts';
import { tripFor } from './outage.ts';
import type { OutageAssessment } from './types.ts';

/** Stuck Jobs a part judges at most: the watch's whole sweeps and the periodic sweeps alike. */
export const CHUNK = 500;

export interface StuckGroup<K> {
  key: K;
  containers: Iterable<Pick<StuckContainer, 'namespace' | 'image' | 'pullClass' | 'stuckSince'>>;
}

/**
 * The groups (a Job's stuck containers, or a bare pod's) in parts of at most `size`, at least one
 * (a sweep of nothing still settles). First those the outage breaker does not wholly hold, longest
 * stuck first: the limits keep the oldest. Then, in parts of their own, the held ones (never
 * failed, so the limits are not theirs), namespace by namespace: a namespace's Job list is then
 * handed out over few parts, not kept whole until the last of many.
 */
export function inChunks<K>(groups: Iterable<StuckGroup<K>>, outage: OutageAssessment | undefined, size = CHUNK): K[][] {
  const ordered: { key: K; held: boolean; at: number; namespace: string }[] = [];
  for (const { key, containers } of groups) {
    let at = Infinity;
    let namespace = '';
    let held = outage?.tripped === true;
    for (const c of containers) {
      at = Math.min(at, c.stuckSince.getTime());
      namespace ||= c.namespace;
      held &&= tripFor(outage!, c) !== undefined;
    }
    ordered.push({ key, held, at, namespace });
  }
  ordered.sort((a, b) => Number(a.held) - Number(b.held) || (a.held ? compareText(a.namespace, b.namespace) : 0) || a.at - b.at);
  const chunks: K[][] = [];
  let part: K[] = [];
  for (let i = 0; i < ordered.length; i += 1) {
    part.push(ordered[i]!.key);
    // The held Jobs never share a part with the others: one stuck elsewhere waits for no held Job's read.
    if (part.length === size || ordered[i + 1]?.held !== ordered[i]!.held) {
      chunks.push(part);
      part = [];
    }
  }
  return chunks.length > 0 ? chunks : [[]];
}
