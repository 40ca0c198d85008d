// Classifies an image-pull failure (waiting reason + message) into a grace class.
//
// Precedence, first hit wins:
//   1. Reasons that settle the class alone: InvalidImageName, ErrImageNeverPull -> permanent;
//      RegistryUnavailable -> transient.
//   2. A pull the runtime cancelled for lack of progress -> stalled (see STALLED_RULE).
//   3. Message cues, transient before auth before permanent. When cues conflict, the class with the
//      longer default grace wins, so ambiguity never fails a Job sooner. It also follows how the
//      errors arise: a 5xx, a timeout or a DNS failure while fetching an auth token says nothing
//      about credentials, and a registry that hides private repositories ("denied ... repository
//      does not exist") cannot tell us the image is missing.
//   4. The reason's default: SignatureValidationFailed -> permanent (policy rejected the image;
//      a retry will not change that), everything else (incl. ImageInspectError) -> unknown.
//
// Cues are matched case-insensitively on the cause only: the v1.32+ `Back-off pulling image "x":
// ErrImagePull: ` prefix is unwrapped, and every part of an image reference is blanked first
// (message.ts). Sources of every form: docs/classification.md.

import { isStuckReason, type PullClass, type StuckContainer, type StuckReason } from '../model.ts';
import { stripImageReferences, unwrapBackOff } from './message.ts';

export interface PullClassRule {
  pullClass: PullClass;
  /** Human-readable cue for docs and audit output. */
  cue: string;
  pattern: RegExp;
  /** The registry said the image is not there (the outage breaker counts bursts of these). */
  notFound?: true;
}

export interface ReasonClass {
  pullClass: PullClass;
  /** True: the reason settles the class before any message cue is looked at. */
  decisive: boolean;
}

export const REASON_CLASSES: Readonly<Record<StuckReason, ReasonClass>> = {
  InvalidImageName: { pullClass: 'permanent', decisive: true },
  ErrImageNeverPull: { pullClass: 'permanent', decisive: true },
  RegistryUnavailable: { pullClass: 'transient', decisive: true },
  SignatureValidationFailed: { pullClass: 'permanent', decisive: false },
  ImageInspectError: { pullClass: 'unknown', decisive: false },
  ErrImagePull: { pullClass: 'unknown', decisive: false },
  ImagePullBackOff: { pullClass: 'unknown', decisive: false },
};

/** An HTTP status code in a "status 503" / "status code: 401" / "HTTP 429" shape (not a bare number). */
function statusCode(codes: string): string {
  return String.raw`(?:status|code|\bhttp)\b\W{0,12}(?:${codes})\b`;
}

function rule(pullClass: PullClass, cue: string, pattern: string, notFound = false): PullClassRule {
  return { pullClass, cue, pattern: new RegExp(pattern, 'i'), ...(notFound ? { notFound: true as const } : {}) };
}

/**
 * The no-progress cancel: containerd >= 1.7 (`image_pull_progress_timeout`, internal/cri/server/
 * images/image_pull.go) and CRI-O (`pull_progress_timeout`) cancel the pull's context, and the
 * kubelet reports gRPC code Canceled with a cause ending in `context canceled`. The kubelet never
 * cancels a pull itself (no timeout on PullImage in cri-client), so that code means the runtime
 * gave up waiting. containerd's own wrapper (`failed to pull and unpack image …: context canceled`)
 * counts under any code or none (cri-client drops `code = Unknown`); any other `context canceled`
 * or `request canceled` stays transient. docs/classification.md has the sources.
 */
const STALLED_RULE = rule(
  'stalled',
  'pull cancelled for lack of progress: code = Canceled ... context canceled',
  String.raw`(?:\bcode = canceled desc = |(?:^|\bdesc = )\s*failed to pull and unpack image\b).*\bcontext cancell?ed\W*$`,
);

/** Message rules in precedence order. */
export const PULL_CLASS_RULES: readonly PullClassRule[] = [
  STALLED_RULE,
  rule('transient', 'registry unavailable', String.raw`registry ?unavailable|registry is unavailable`),
  rule(
    'transient',
    '429 / toomanyrequests / Too Many Requests / rate limit',
    String.raw`too ?many ?requests|rate ?limit|${statusCode('429')}`,
  ),
  rule('transient', 'pull QPS exceeded', String.raw`pull qps exceeded`),
  rule(
    'transient',
    '5xx (500 Internal Server Error, 502 Bad Gateway, 503 Service Unavailable, 504 Gateway Timeout)',
    String.raw`internal server error|bad gateway|service unavailable|gateway time-?out|${statusCode(String.raw`5\d\d`)}`,
  ),
  rule(
    'transient',
    'DNS: no such host, temporary failure in name resolution, server misbehaving',
    String.raw`no such host|temporary failure in name resolution|server misbehaving`,
  ),
  rule(
    'transient',
    'dial tcp, connection refused/reset, broken pipe, network/host unreachable',
    String.raw`dial tcp|connection refused|connection reset|broken pipe|network is unreachable|no route to host`,
  ),
  rule(
    'transient',
    'Windows sockets: wsarecv, wsasend, connectex (forcibly closed, did not properly respond, actively refused)',
    String.raw`\bwsa(?:recv|send)\b|\bconnectex\b|forcibly closed by the remote host|did not properly respond|actively refused`,
  ),
  rule(
    'transient',
    'timeouts: i/o timeout, TLS handshake timeout, timed out, context deadline exceeded',
    String.raw`\btime-?out\b|timed out|deadline exceeded`,
  ),
  rule(
    'transient',
    'TLS/certificate errors: tls:, x509:',
    String.raw`\btls:|\bx509:|\bcertificate (?:signed by unknown|has expired|is not valid)`,
  ),
  rule('transient', 'request canceled, context canceled', String.raw`request cancell?ed|context cancell?ed`),
  rule('transient', 'EOF / unexpected EOF', String.raw`\beof\b`),

  // Before the auth cues: the node's own layer store, not the registry, said "denied".
  rule(
    'unknown',
    "the node's layer store refused the unpack (Windows: Access is denied; hcsshim ProcessBaseLayer/ImportLayer; failed to extract layer)",
    String.raw`\baccess is denied\b|\bhcsshim::|\bfailed to (?:extract|register) layer\b`,
  ),

  rule('auth', 'unauthorized, not authorized', String.raw`unauthori[sz]ed|not authori[sz]ed`),
  rule('auth', 'authentication required', String.raw`authentication required`),
  rule(
    'auth',
    'denied (pull access denied, requested access to the resource is denied; not "permission denied")',
    String.raw`(?<!permission )\bdenied\b`,
  ),
  rule('auth', 'insufficient_scope', String.raw`insufficient[_ ]scope`),
  rule(
    'auth',
    'no basic auth credentials, invalid credentials, incorrect username or password',
    String.raw`no basic auth credentials|(?:invalid|bad|missing|no) credentials|(?:invalid|incorrect) username`,
  ),
  rule(
    'auth',
    'authorization failed, failed to authorize, expired token',
    String.raw`authori[sz]ation failed|failed to authori[sz]e|token has expired|expired token`,
  ),
  rule('auth', '401, 403 Forbidden', String.raw`\bforbidden\b|${statusCode('401|403')}`),

  rule(
    'permanent',
    'no matching platform (manifest list or OCI image index)',
    String.raw`no match for platform|no image found in (?:manifest list|image index)|no matching manifest for`,
  ),
  rule(
    'permanent',
    'an OCI artifact that is not a container image (Helm chart, model): unsupported image-specific operation on artifact, unsupported media type, mismatched image rootfs and manifest layers',
    String.raw`unsupported image-specific operation on artifact|invalid mixed OCI image|\bunsupported media type\b|mismatched image rootfs and manifest layers`,
  ),
  rule(
    'permanent',
    "a registry the node's configuration blocks (registries.conf blocked = true, OpenShift image policies)",
    String.raw`\bis blocked in\b|\bis rejected by policy\b`,
  ),
  rule(
    'permanent',
    'image format the runtime refuses (schema 1: containerd 2, its transfer service, Docker Engine 26+)',
    String.raw`schema 1 images have been deprecated|is no longer supported since containerd|schema 1 image manifests are no longer supported|docker image format v1 and docker image manifest version 2, schema 1|manifest\.v1\+prettyjws not supported`,
  ),
  rule('permanent', 'short name that resolves nowhere', String.raw`did not resolve to an alias`),
  rule(
    'permanent',
    'short name ambiguous in enforcing mode (CRI-O: returns ambiguous list)',
    String.raw`returns ambiguous list|short-name resolution enforced but cannot prompt`,
  ),
  rule(
    'permanent',
    'invalid reference format, repository name must be lowercase',
    String.raw`invalid reference format|repository name must be lowercase|couldn't parse image (?:name|reference)`,
  ),
  rule('permanent', 'manifest unknown, name unknown, blob unknown', String.raw`\b(?:manifest|name|blob)[ _]unknown\b`, true),
  rule(
    'permanent',
    'not found (incl. failed to resolve reference ...: not found, 404 Not Found)',
    String.raw`not found|${statusCode('404')}`,
    true,
  ),
  rule('permanent', 'repository does not exist', String.raw`\b(?:repository|repo|image|tag|manifest) (?:does not|doesn't) exist`, true),
];

export interface PullClassification {
  pullClass: PullClass;
  /** What decided it: `reason X`, a rule's cue, or `default for X`. */
  decidedBy: string;
  /** The reason whose rules applied (the embedded one for a v1.32+ back-off message). */
  reason: StuckReason;
  /** True when a not-found rule decided (image, tag or repository not found on the registry). */
  notFound: boolean;
}

/**
 * The answers for the last few hundred distinct failures. A pull failure repeats: every pod of an
 * outage, or of a Job's retries, carries the same message for the same image, and each stuck
 * container is explained when it is observed and again when the outage breaker counts it.
 */
const explained = new Map<string, Readonly<PullClassification>>();
const EXPLAINED_KEPT = 512;

/** Like `classifyPullFailure`, and says which rule decided. */
export function explainPullFailure(reason: StuckReason, message: string, image?: string): Readonly<PullClassification> {
  const key = `${reason}\n${image ?? ''}\n${message}`;
  const known = explained.get(key);
  if (known) return known;
  const answer = Object.freeze(explainAnew(reason, message, image));
  if (explained.size >= EXPLAINED_KEPT) explained.clear();
  explained.set(key, answer);
  return answer;
}

function explainAnew(reason: StuckReason, message: string, image?: string): PullClassification {
  const unwrapped = unwrapBackOff(reason, message);
  const effective = REASON_CLASSES[unwrapped.reason];
  if (effective.decisive) {
    return { pullClass: effective.pullClass, decidedBy: `reason ${unwrapped.reason}`, reason: unwrapped.reason, notFound: false };
  }
  const text = stripImageReferences(unwrapped.cause, image);
  const hit = PULL_CLASS_RULES.find((r) => r.pattern.test(text));
  if (hit) return { pullClass: hit.pullClass, decidedBy: hit.cue, reason: unwrapped.reason, notFound: hit.notFound === true };
  return { pullClass: effective.pullClass, decidedBy: `default for ${unwrapped.reason}`, reason: unwrapped.reason, notFound: false };
}

/**
 * The grace class of a pull failure. `image`, when given, is also stripped from the message so
 * an unquoted image name cannot look like a cue.
 */
export function classifyPullFailure(reason: StuckReason, message: string, image?: string): PullClass {
  return explainPullFailure(reason, message, image).pullClass;
}

/** True when a stuck container's failure says its image is not on the registry (a not-found rule decided). */
export function isNotFoundFailure(c: Pick<StuckContainer, 'reason' | 'message' | 'image' | 'pullClass'>): boolean {
  return c.pullClass === 'permanent' && isStuckReason(c.reason) && explainPullFailure(c.reason, c.message, c.image).notFound;
}

export interface ClassificationRow {
  step: 'reason' | 'message' | 'default';
  pullClass: PullClass;
  cues: string[];
}

/** The rule table in evaluation order, grouped for the README. */
export function describeClassification(): ClassificationRow[] {
  const rows: ClassificationRow[] = [];
  const reasons = Object.entries(REASON_CLASSES) as [StuckReason, ReasonClass][];
  const push = (step: ClassificationRow['step'], pullClass: PullClass, cue: string): void => {
    const last = rows.at(-1);
    if (last?.step === step && last.pullClass === pullClass) last.cues.push(cue);
    else rows.push({ step, pullClass, cues: [cue] });
  };
  for (const [reason, c] of reasons) if (c.decisive) push('reason', c.pullClass, `reason ${reason}`);
  for (const r of PULL_CLASS_RULES) push('message', r.pullClass, r.cue);
  for (const [reason, c] of reasons) if (!c.decisive) push('default', c.pullClass, `reason ${reason}`);
  return rows;
}
