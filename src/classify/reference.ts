// The parts of an image reference as the container runtime resolves it. The one place that says
// which registry host and repository an image names (the outage breaker and the message stripper
// both use it).

export interface ImageReference {
  /** Registry host, lower-case, with port; `docker.io` when the reference names none. */
  host: string;
  /** Repository path on that host, without tag or digest (`library/nginx` for `nginx`). */
  path: string;
  /** The path as written, without tag or digest (`nginx`, `acme/app`, `quay.io/acme/app`). */
  written: string;
  /** True when the reference names its registry host. */
  hasHost: boolean;
}

/** Where a reference that names no host is pulled from. */
export const DEFAULT_REGISTRY = 'docker.io';
/** The names runtimes print in a message for an image of the default registry that names no host. */
export const DEFAULT_REGISTRY_PRINTED: readonly string[] = [DEFAULT_REGISTRY, 'index.docker.io'];
const DEFAULT_REGISTRY_ALIASES: readonly string[] = [...DEFAULT_REGISTRY_PRINTED, 'registry-1.docker.io'];

/** The host rule: a first path component is a registry host when it has a '.' or a ':port', or is `localhost`. */
function looksLikeHost(component: string): boolean {
  return component.includes('.') || component.includes(':') || component === 'localhost';
}

/** The same rule as a pattern, for finding `host/path` references in a runtime's message. */
export const HOST_PATTERN = String.raw`(?:localhost(?::\d+)?|[a-z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)*(?:\.[a-z0-9-]+|:\d+))`;

/** Splits an image reference; a transport prefix (`docker://`) is ignored. */
export function parseImageReference(image: string): ImageReference {
  const ref = image.trim().replace(/^[a-z][a-z0-9+.-]*:\/\//i, '');
  const written = ref.replace(/@.*$/, '').replace(/:[^/:]*$/, '');
  const slash = written.indexOf('/');
  const first = slash === -1 ? '' : written.slice(0, slash);
  if (first !== '' && looksLikeHost(first)) {
    const host = first.toLowerCase();
    return {
      host: DEFAULT_REGISTRY_ALIASES.includes(host) ? DEFAULT_REGISTRY : host,
      path: written.slice(slash + 1),
      written,
      hasHost: true,
    };
  }
  const path = written === '' ? '' : slash === -1 ? `library/${written}` : written;
  return { host: DEFAULT_REGISTRY, path, written, hasHost: false };
}

/** The registry host an image is pulled from (`docker.io` when it names none). */
export function registryHost(image: string): string {
  return parseImageReference(image).host;
}

/** `host/path`: the repository, whatever tag or digest and however the name was written. */
export function repositoryOf(image: string): string {
  const { host, path } = parseImageReference(image);
  return `${host}/${path}`.toLowerCase();
}
