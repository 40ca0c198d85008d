// Turns a kubelet waiting message into the text the class rules look at.

import { isStuckReason, STUCK_REASONS, type StuckReason } from '../model.ts';

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
  const ref = image.trim().replace(/^[a-z][a-z0-9+.-]*:\/\//i, '');
  if (ref === '') return [];
  const untagged = ref.replace(/@.*$/, '').replace(/:[^/:]*$/, '');
  const names = new Set<string>([untagged]);
  const slash = untagged.indexOf('/');
  const first = slash === -1 ? '' : untagged.slice(0, slash);
  const hasRegistry = first.includes('.') || first.includes(':') || first === 'localhost';
  if (!hasRegistry) {
    const path = slash === -1 ? `library/${untagged}` : untagged;
    names.add(`docker.io/${path}`);
    names.add(`index.docker.io/${path}`);
    names.add(path);
  }
  // A bare word (`denied`) is too likely to be a real cue; only strip reference-shaped forms.
  return [...names].filter((name) => /[/.:]/.test(name)).sort((a, b) => b.length - a.length);
}

const TAG_OR_DIGEST = String.raw`(?::[\w][\w.-]{0,127})?(?:@[\w+.-]+:[0-9a-f]+)?`;
const BEFORE_REF = String.raw`(?<![\w./-])`;
const AFTER_REF = String.raw`(?![\w/-])`;
const URL = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"']*/gi;
const QUOTED = /"([^"\s]*)"/g;
const ERROR_CODE = /^[A-Z][A-Z_]*$/;
const REGISTRY_REF = new RegExp(
  `${BEFORE_REF}[a-z0-9][a-z0-9-]*(?:\\.[a-z0-9-]+)*(?:\\.[a-z0-9-]+|:\\d+)(?:/[\\w.-]+)+${TAG_OR_DIGEST}${AFTER_REF}`,
  'gi',
);
const PULL_FAILED_FOR = /\bimage pull failed for \S+ because/gi;

/**
 * Removes image references so that an image *name* (`acme/denied-404:1`) cannot drive the class:
 * URLs, whitespace-free quoted strings (kept: upper-case registry error codes such as "DENIED"),
 * the given image in its usual forms, and `host.tld/path[:tag]` references.
 */
export function stripImageReferences(text: string, image?: string): string {
  let out = text
    .replace(PULL_FAILED_FOR, 'image pull failed because')
    .replace(URL, ' ')
    .replace(QUOTED, (all, inner: string) => (ERROR_CODE.test(inner) ? all : '""'));
  for (const name of imageReferenceNames(image ?? '')) {
    out = out.replace(new RegExp(`${BEFORE_REF}${escapeRegExp(name)}${TAG_OR_DIGEST}${AFTER_REF}`, 'gi'), ' ');
  }
  return out.replace(REGISTRY_REF, ' ');
}
