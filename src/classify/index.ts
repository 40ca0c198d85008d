export {
  classifyPullFailure,
  describeClassification,
  explainPullFailure,
  isNotFoundFailure,
  PULL_CLASS_RULES,
  REASON_CLASSES,
  type ClassificationRow,
  type PullClassification,
  type PullClassRule,
  type ReasonClass,
} from './pull-class.ts';
export { imageReferenceNames, stripImageReferences, unwrapBackOff, type PullCause } from './message.ts';
export { parseImageReference, registryHost, repositoryOf, type ImageReference } from './reference.ts';
export { failingReference, type FailingReference } from './image-volume.ts';
export { NEVER_PULL_AMBIGUOUS, NEVER_PULL_CREDENTIALS, reasonNote } from './never-pull.ts';
export { controllerOf, controllerRefOf, findStuckContainers, isActivePod, toDate, type Timestamp } from './stuck.ts';
export { containerThatRan } from './ran.ts';
