// The Kubernetes minors the sweeper is proven on (docs/kubernetes-versions.md), and the warning
// for an API server older than the oldest of them, from its /version answer.

/** The oldest minor the compatibility subset runs against (Kubernetes 1.34). */
export const OLDEST_SUPPORTED = { major: 1, minor: 34 } as const;

/** The fields of /version the check reads (k8s.io/apimachinery version.Info). */
export interface ServerVersion {
  major?: string;
  minor?: string;
  gitVersion?: string;
}

/**
 * Major and minor from /version. Managed clusters append to `minor` ("34+" on EKS and GKE);
 * `gitVersion` (v1.34.4-eks-…) is the fallback when the numbers are missing.
 */
export function parseServerVersion(v: ServerVersion): { major: number; minor: number } | undefined {
  const major = /^(\d+)/.exec(v.major ?? '')?.[1];
  const minor = /^(\d+)/.exec(v.minor ?? '')?.[1];
  if (major && minor) return { major: Number(major), minor: Number(minor) };
  const git = /^v?(\d+)\.(\d+)\./.exec(v.gitVersion ?? '');
  return git ? { major: Number(git[1]), minor: Number(git[2]) } : undefined;
}

/** Pure: the warning to log for this server, or undefined when its minor is supported. */
export function serverVersionWarning(v: ServerVersion): string | undefined {
  const parsed = parseServerVersion(v);
  const oldest = `${OLDEST_SUPPORTED.major}.${OLDEST_SUPPORTED.minor}`;
  if (!parsed) {
    return `cannot tell the Kubernetes version of the API server from /version (${JSON.stringify(v)}); the sweeper is tested on ${oldest} and later`;
  }
  const older = parsed.major < OLDEST_SUPPORTED.major || (parsed.major === OLDEST_SUPPORTED.major && parsed.minor < OLDEST_SUPPORTED.minor);
  if (!older) return undefined;
  return (
    `the API server runs Kubernetes ${v.gitVersion ?? `${parsed.major}.${parsed.minor}`}, older than ${oldest}, the oldest minor the sweeper is tested on: ` +
    'it may lack fields, conditions and kubelet messages the sweeper relies on (docs/kubernetes-versions.md); sweeping anyway'
  );
}
