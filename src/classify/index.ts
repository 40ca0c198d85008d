export {
  classifyPullFailure,
  describeClassification,
  explainPullFailure,
  PULL_CLASS_RULES,
  REASON_CLASSES,
  type ClassificationRow,
  type PullClassification,
  type PullClassRule,
  type ReasonClass,
} from './pull-class.ts';
export { imageReferenceNames, stripImageReferences, unwrapBackOff, type PullCause } from './message.ts';
export { controllerOf, findStuckContainers, isActivePod, toDate, type Timestamp } from './stuck.ts';
