// Turns a kubelet waiting message into the text the class rules look at: the runtime's cause, with
// every part of an image reference (registry, repository, tag, digest) blanked wherever the
// runtime prints it, so that no image name can decide the class. See docs/classification.md.

import { isStuckReason, STUCK_REASONS, type StuckReason } from '../model.ts';
import { DEFAULT_REGISTRY_PRINTED, HOST_PATTERN, parseImageReference } from './reference.ts';

export interface PullCause {
  /** The reason that produced the cause (the embedded one for a v1.32+ back-off message). */
  reason: StuckReason;
  /** The runtime's error text, still with image references in it. */
  cause: string;
}

const BACK_OFF = /^\s*Back-off pulling image\s+(?:"(?:[^"\\]|\\.)*"|\S+)\s*(?::\s*([\s\S]*))?$/i;
const EMBEDDED_REASON = new RegExp(`^(${STUCK_REASONS.join('|')}):\\s*([\\s\\S]*)$`);

/**
 * Splits `Back-off pulling image "x": ErrImagePull: <cause>` (kubelet v1.32+) into the embedded
 * reason and its cause. Any other message is returned as is; a bare older back-off has no cause.
 */
export function unwrapBackOff(reason: StuckReason, message: string): PullCause {
  const backOff = BACK_OFF.exec(message);
  if (!backOff) return { reason, cause: message };
  const rest = (backOff[1] ?? '').trim();
  const embedded = EMBEDDED_REASON.exec(rest);
  if (embedded?.[1] !== undefined && isStuckReason(embedded[1])) {
    return { reason: embedded[1], cause: embedded[2] ?? '' };
  }
  return { reason, cause: rest };
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Forms an image reference takes in runtime messages: as written, untagged, and docker.io-normalised. */
export function imageReferenceNames(image: string): string[] {
  const { written, path, hasHost } = parseImageReference(image);
  if (written === '') return [];
  const names = new Set<string>([written]);
  if (!hasHost) {
    for (const alias of DEFAULT_REGISTRY_PRINTED) names.add(`${alias}/${path}`);
    names.add(path);
  }
  // A bare word (`denied`) is too likely to be a real cue; only strip reference-shaped forms.
  return [...names].filter((name) => /[/.:]/.test(name)).sort((a, b) => b.length - a.length);
}

const TAG_OR_DIGEST = String.raw`(?::[\w][\w.-]{0,127})?(?:@[\w+.-]+:[0-9a-f]+)?`;
const BEFORE_REF = String.raw`(?<![\w./-])`;
const AFTER_REF = String.raw`(?![\w/-])`;
/** A token up to the `: ` that ends it, whitespace, or the end (a host may carry a `:port`). */
const TOKEN = String.raw`[^\s"']+?(?=:\s|:$|,|\s|$)`;

const URL = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"']*/gi;
/** Every double-quoted string, so that quotes pair up right even around phrases with spaces. */
const DOUBLE_QUOTED = /"((?:[^"\\]|\\.)*)"/g;
const SINGLE_QUOTED = /'[^'\s]*'/g;
const ERROR_CODE = /^[A-Z][A-Z_]*$/;
const DIGEST = /\b[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-f0-9]{32,}\b/gi;
const REGISTRY_REF = new RegExp(`${BEFORE_REF}${HOST_PATTERN}(?:/[\\w.-]+)+${TAG_OR_DIGEST}${AFTER_REF}`, 'gi');

interface Slot {
  /** Where the runtime prints it (file in the runtime's repository). */
  source: string;
  pattern: RegExp;
  keep: string;
}

function slot(source: string, pattern: string, keep: string): Slot {
  return { source, pattern: new RegExp(pattern, 'gi'), keep };
}

/**
 * Places where a runtime prints a name unquoted and outside a URL, so that neither the quote
 * rule nor the `host.tld/path` rule would catch it. Each is blanked to the words around it.
 */
const NAME_SLOTS: readonly Slot[] = [
  slot(
    'kubernetes pkg/kubelet/images/image_manager.go (evalCRIPullErr)',
    String.raw`\bimage pull failed for \S+ because`,
    'image pull failed because',
  ),
  slot(
    'containers/image docker/docker_image_src.go (fetchManifest)',
    String.raw`\breading manifest \S+ in \S+?(?=:\s|:$|\s|$)`,
    'reading manifest in',
  ),
  slot(
    'containers/image docker/docker_client.go (detectProperties)',
    String.raw`\bpinging (?:container|docker) registry ${TOKEN}`,
    'pinging registry',
  ),
  slot(
    'containers/image docker/docker_image_dest.go (blobExists)',
    String.raw`\bwhether a blob \S+ exists in ${TOKEN}`,
    'whether a blob exists in',
  ),
  slot('containerd <= 1.6.24 remotes/docker/resolver.go (Resolve)', String.raw`\bfrom host \S+`, 'from host'),
  slot("Docker Desktop's registry proxy (docker/for-win#13994)", String.raw`\bwriting response to ${TOKEN}`, 'writing response to'),
  slot('containerd <= 1.6.24 remotes/docker/resolver.go (Resolve)', String.raw`\[(?:manifests|blobs)\s[^\]]*\]`, '[]'),
  slot('Go net (DNS errors: lookup HOST on SERVER)', String.raw`\blookup ${TOKEN}`, 'lookup'),
  slot('moby distribution/errors.go (TranslatePullError)', String.raw`\bpull access denied for [^\s,]+`, 'pull access denied'),
  slot('moby distribution/errors.go (TranslatePullError)', String.raw`\bmanifest for \S+ not found`, 'manifest not found'),
  slot(
    'moby distribution/errors.go; Harbor registry messages',
    String.raw`\b(repository|artifact) (?!does\b|name\b|with\b)\S+ not found`,
    '$1 not found',
  ),
  slot('registry error detail printed as a Go map', String.raw`\bName:\S+`, 'Name:'),
  slot(
    'containers/image docker/docker_client.go (newDockerClient: a blocked registries.conf prefix)',
    String.raw`\bregistry \S+ is blocked in\b`,
    'registry is blocked in',
  ),
  slot('moby distribution/pull_v2.go (unsupportedMediaTypeError)', String.raw`\bunsupported media type \S+`, 'unsupported media type'),
  slot(
    'moby distribution (DeprecatedSchema1ImageError)',
    String.raw`\bSuggest the author of \S+ to upgrade\b`,
    'Suggest the author of to upgrade',
  ),
  slot(
    'cri-o internal/storage/image.go (candidatesForPotentiallyShortImageName)',
    String.raw`\bimage name \S+ returns ambiguous list`,
    'image name returns ambiguous list',
  ),
];

/**
 * Removes image references so that an image *name* (`acme/denied-404:fix-timeout`) cannot drive the
 * class: URLs, whitespace-free quoted strings (kept: upper-case registry error codes such as
 * "DENIED"), names in the runtimes' unquoted slots (NAME_SLOTS), the given image in its usual
 * forms, digests, and `host.tld/path[:tag]` references.
 */
export function stripImageReferences(text: string, image?: string): string {
  let out = text.replace(URL, ' ');
  out = out
    .replace(DOUBLE_QUOTED, (all, inner: string) => (/\s/.test(inner) || ERROR_CODE.test(inner) ? all : '""'))
    .replace(SINGLE_QUOTED, "''");
  for (const s of NAME_SLOTS) out = out.replace(s.pattern, s.keep);
  for (const name of imageReferenceNames(image ?? '')) {
    out = out.replace(new RegExp(`${BEFORE_REF}${escapeRegExp(name)}${TAG_OR_DIGEST}${AFTER_REF}`, 'gi'), ' ');
  }
  return out.replace(DIGEST, ' ').replace(REGISTRY_REF, ' ');
}
