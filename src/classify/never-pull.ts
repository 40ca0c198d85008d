// What an ErrImageNeverPull means, in words an operator can act on. With KubeletEnsureSecretPulledImages
// (on by default since Kubernetes 1.35) the kubelet refuses an image that is on the node but was
// pulled with credentials the pod does not have; under pull policy Never it then reports exactly
// what it reports for an absent image, `Container image "x" is not present with pull policy of
// Never`, so as not to reveal that the image is there (pkg/kubelet/images/image_manager.go v1.37.2,
// imageNotPresentOnNeverPolicyError, called from imagePullPrecheck and from EnsureImageExists
// after imagePullManager.MustAttemptImagePull). docs/classification.md.
import type { WaitingReason } from '../model.ts';

/** A message that says so outright: the image is there, the pod's credentials are not those it was pulled with. */
const CREDENTIALS = /\bcredentials?\b|\b(?:cannot|can't|could not) be accessed\b|\bnot accessible\b/i;
const NOT_PRESENT = /\bis not present with pull policy of Never\b/i;

export const NEVER_PULL_CREDENTIALS =
  'the image is on the node but this pod lacks the credentials it was pulled with (ensure secret pulled images, Kubernetes 1.35+)';
export const NEVER_PULL_AMBIGUOUS =
  'pull policy Never: the image is not on the node, or (Kubernetes 1.35+, ensure secret pulled images) it is but was pulled ' +
  'with credentials this pod lacks; the kubelet words both alike';

/** A note to put beside the waiting reason, or undefined when the reason speaks for itself. */
export function reasonNote(reason: WaitingReason, message: string): string | undefined {
  if (reason !== 'ErrImageNeverPull') return undefined;
  if (CREDENTIALS.test(message)) return NEVER_PULL_CREDENTIALS;
  return NOT_PRESENT.test(message) || message.trim() === '' ? NEVER_PULL_AMBIGUOUS : undefined;
}
