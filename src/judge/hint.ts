// The hint: what to do about a stuck container's cause, in a few words, for the Job's message,
// its Event and the audit line (docs/contract.md "How a Job is failed"). By the class, and within
// it by what decided the class (classify/pull-class.ts), so the hint follows the rule that matched
// and never the image's name. Pure.
import {
  explainPullFailure,
  NEVER_PULL_CREDENTIALS,
  PULL_CLASS_RULES,
  reasonNote,
  stripImageReferences,
  unwrapBackOff,
} from '../classify/index.ts';
import { isStuckReason, type PullClass, type StuckContainer } from '../model.ts';

/** Per class: the rule's cue (a pattern on `decidedBy`) and its hint, first match wins; the last of each has no cue. */
const HINTS: Readonly<Record<PullClass, readonly (readonly [RegExp | undefined, string])[]>> = {
  permanent: [
    [/reason InvalidImageName|invalid reference/i, 'the image reference is not valid: correct it in the pod template'],
    [/platform/i, "the image has no variant for the node's OS and architecture: build one for it, or run the pod on a node it fits"],
    [/schema 1|format/i, 'the runtime no longer pulls this image format (Docker schema 1): rebuild and push the image'],
    [/short name/i, 'a short image name resolves to no single registry on the node: write the full reference (registry/repository:tag)'],
    [/SignatureValidationFailed/i, "the node's signature policy refused the image: use a signed image the policy accepts"],
    [
      undefined,
      'the image or tag does not exist in that repository, or the repository does not exist: check the reference, or push the image first',
    ],
  ],
  auth: [
    [
      undefined,
      'the registry refused the pull: the pod has no credential it accepts for that repository; add one as an imagePullSecret of the ' +
        "pod or of its ServiceAccount (or give the node's credential provider access)",
    ],
  ],
  transient: [
    [/429|rate limit/i, 'the registry is rate-limiting pulls: pull through a mirror or with credentials, or wait and retry'],
    [/QPS/i, "the kubelet's own pull rate limit (registryPullQPS) was reached: wait, or raise it on the node"],
    [/5xx/i, 'the registry answered with a server error: check the registry (or the proxy in front of it)'],
    [/DNS/i, "the node cannot resolve the registry's host name: check the node's DNS"],
    [/dial tcp|unreachable/i, 'the node cannot connect to the registry: check the network, firewall or proxy between them'],
    [/timeout/i, 'the registry did not answer in time: check the registry and the network between it and the node'],
    [/TLS|certificate/i, "the node does not trust the registry's TLS certificate: fix the certificate, or install its CA on the node"],
    [undefined, 'the registry is unavailable or dropped the connection: check the registry and the network between it and the node'],
  ],
  unknown: [
    [/layer store/i, "the node could not unpack the image: check the node's disk space and its image store"],
    [undefined, "the kubelet's message says what failed: check the image reference, the registry and the node"],
  ],
  stalled: [
    [
      undefined,
      'the pull makes no progress: the registry (or a proxy in between) accepts the connection but sends nothing; check it, ' +
        "or the image's size against the node's bandwidth",
    ],
  ],
};

const NEVER_PULL_ABSENT = 'pull policy Never and the image is not on the node: load it onto the node, or let the kubelet pull it';
const NEVER_PULL_OTHERS_CREDENTIALS =
  'the image is on the node, but it was pulled with credentials this pod lacks: give the pod that pull secret, or let the kubelet pull it';

/** The hint for a stuck container (or a decision about one). */
export function hintFor(c: Pick<StuckContainer, 'reason' | 'message' | 'image' | 'pullClass'>): string {
  if (c.reason === 'ErrImageNeverPull') {
    return reasonNote(c.reason, c.message) === NEVER_PULL_CREDENTIALS ? NEVER_PULL_OTHERS_CREDENTIALS : NEVER_PULL_ABSENT;
  }
  if (!isStuckReason(c.reason)) return hintByCue(c.pullClass, '');
  const { decidedBy } = explainPullFailure(c.reason, c.message, c.image);
  if (!decidedBy.startsWith('reason ')) return hintByCue(c.pullClass, decidedBy);
  // A reason that decides the class alone (RegistryUnavailable) may still say why in its message:
  // the first of the class's rules that matches it and has a hint of its own.
  const text = stripImageReferences(unwrapBackOff(c.reason, c.message).cause, c.image);
  const fallback = hintByCue(c.pullClass, decidedBy);
  const said = PULL_CLASS_RULES.filter((r) => r.pullClass === c.pullClass && r.pattern.test(text))
    .map((r) => hintByCue(c.pullClass, r.cue))
    .find((hint) => hint !== HINTS[c.pullClass].at(-1)![1]);
  return said ?? fallback;
}

/** The hint of `pullClass` whose cue matches `decidedBy` (a rule's cue, `reason X` or `default for X`). */
export function hintByCue(pullClass: PullClass, decidedBy: string): string {
  const rows = HINTS[pullClass];
  return (rows.find(([cue]) => cue === undefined || cue.test(decidedBy)) ?? rows.at(-1)!)[1];
}
