export * from './types.ts';
export { ANNOTATION_PREFIX, ANNOTATIONS, ignoredByAnnotation } from './annotations.ts';
export { DurationError, formatDuration, parseGoDuration, tryParseGoDuration } from './duration.ts';
export {
  compileNamespaceGlob,
  matchesAnyNamespaceGlob,
  matchesNamespaceGlob,
  namespaceGlobError,
  parseNamespaceGlob,
} from './glob.ts';
export type { GlobParse } from './glob.ts';
export { policyJsonSchema } from './json-schema.ts';
export {
  BUILTIN_POLICY,
  BUILTIN_RULE_NAME,
  DEFAULTS,
  formatPath,
  parsePolicyDocument,
  parsePolicyYaml,
  POLICY_KEY,
  SYSTEM_NAMESPACES,
} from './parse.ts';
export type { PolicyDocumentResult, PolicyParseResult } from './parse.ts';
export {
  DEFAULTS_SOURCE,
  explainRules,
  graceForJob,
  matchRule,
  policyNeedsNamespaceLabels,
  resolveForNamespace,
  ruleMatches,
} from './resolve.ts';
export type { NamespaceInput, RuleMatch } from './resolve.ts';
export {
  DEFAULT_ACTION,
  DEFAULT_GRACE_TEXT,
  DEFAULT_JOB_OVERRIDES_TEXT,
  DEFAULT_LIMITS,
  policyFileSchema,
  ruleNameError,
  toPolicy,
} from './schema.ts';
export type { PolicyFile } from './schema.ts';
export {
  formatSelector,
  isEmptySelector,
  labelKeyError,
  labelValueError,
  matchesSelector,
  requirementValuesError,
  SELECTOR_OPERATORS,
} from './selector.ts';
