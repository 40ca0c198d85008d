import type { StuckContainer } from '../model.ts';
import type { Limits } from '../policy/types.ts';
import type { OutageAssessment } from './types.ts';

/**
 * The registry is probably down when many pods across many images are stuck, mostly on
 * transient errors. A pod counts as transient when any of its stuck containers is.
 */
export function assessOutage(stuck: readonly StuckContainer[], limits: Limits['outage']): OutageAssessment {
  const transientByPod = new Map<string, boolean>();
  const images = new Set<string>();
  for (const c of stuck) {
    images.add(c.image);
    transientByPod.set(c.podUid, (transientByPod.get(c.podUid) ?? false) || c.pullClass === 'transient');
  }
  const stuckPods = transientByPod.size;
  const transientPods = [...transientByPod.values()].filter(Boolean).length;
  const transientFraction = stuckPods === 0 ? 0 : transientPods / stuckPods;
  const tripped =
    stuckPods >= limits.minStuckPods && images.size >= limits.minImages && transientFraction >= limits.transientFraction;
  return { tripped, stuckPods, images: images.size, transientPods, transientFraction };
}
