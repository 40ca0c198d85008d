// Which reference a stuck container waits on: its own image, or an image volume it mounts
// (`spec.volumes[].image`, GA in Kubernetes 1.36). The kubelet pulls a pod's image volumes before
// it starts any container; a container that mounts one whose pull failed waits with that pull's
// reason and message (pkg/kubelet/kuberuntime/kuberuntime_manager.go v1.37.2: getImageVolumes,
// toKubeContainerImageVolumes, the last failing mount in volumeMounts order), and its own image
// is not pulled at all. So the message names the volume's reference. docs/classification.md.
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { DEFAULT_REGISTRY_PRINTED, parseImageReference } from './reference.ts';

export interface FailingReference {
  /** The reference whose pull failed. */
  image: string;
  /** The image volume it belongs to; undefined for the container's own image. */
  volume: string | undefined;
}

interface Candidate {
  image: string;
  volume: string | undefined;
}

/** Where the kubelet quotes the reference it was pulling (pkg/kubelet/images/image_manager.go v1.37.2). */
const KUBELET_QUOTES: readonly RegExp[] = [
  /^\s*Back-off pulling image "((?:[^"\\]|\\.)*)"/,
  /^\s*Container image "((?:[^"\\]|\\.)*)" is not present with pull policy of Never/,
  /^\s*Failed to apply default image tag "((?:[^"\\]|\\.)*)"/,
  /^\s*image pull failed for (\S+) because/,
];

const BEFORE = String.raw`(?<![\w./-])`;
const AFTER = String.raw`(?![\w/-])`;
const HOST_AFTER = String.raw`(?![\w.-])`;

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function appears(message: string, names: readonly string[], after = AFTER): boolean {
  return names.some((n) => n !== '' && new RegExp(`${BEFORE}${escape(n)}${after}`, 'i').test(message));
}

/** How surely the message names this reference: 3 whole, 2 its repository, 1 its registry host, 0 not at all. */
function namedHow(message: string, image: string): number {
  const ref = parseImageReference(image);
  if (ref.written === '') return 0;
  const suffix = image.trim().slice(image.trim().indexOf(ref.written) + ref.written.length);
  const repositories = new Set([ref.written, `${ref.host}/${ref.path}`]);
  if (!ref.hasHost) for (const alias of DEFAULT_REGISTRY_PRINTED) repositories.add(`${alias}/${ref.path}`);
  const whole = [...repositories].flatMap((r) => (suffix === '' ? [r, `${r}:latest`] : [`${r}${suffix}`]));
  if (appears(message, whole)) return 3;
  // CRI-O prints `reading manifest TAG in REPO` (containers/image docker/docker_image_src.go).
  const tag = /^:([\w][\w.-]*)/.exec(suffix)?.[1] ?? 'latest';
  if ([...repositories].some((r) => message.includes(`reading manifest ${tag} in ${r}`))) return 3;
  if (
    appears(
      message,
      [...repositories].filter((r) => r.includes('/')),
    )
  )
    return 2;
  const hosts = ref.hasHost ? [ref.host] : [...DEFAULT_REGISTRY_PRINTED, 'registry-1.docker.io'];
  return appears(message, hosts, HOST_AFTER) ? 1 : 0;
}

/** The image volumes a container mounts, in its volumeMounts order. */
function mountedImageVolumes(pod: V1Pod, container: V1Container): Candidate[] {
  const references = new Map<string, string>();
  for (const v of pod.spec?.volumes ?? []) if (v.image?.reference) references.set(v.name, v.image.reference);
  const out: Candidate[] = [];
  for (const m of container.volumeMounts ?? []) {
    const image = references.get(m.name);
    if (image !== undefined && !out.some((c) => c.volume === m.name)) out.push({ image, volume: m.name });
  }
  return out;
}

/** Whether the pod has an image volume; most pods have none, and nothing else is built for them. */
export function hasImageVolumes(pod: V1Pod): boolean {
  return pod.spec?.volumes?.some((v) => v.image?.reference) ?? false;
}

/**
 * The reference a stuck container's failure is about. The kubelet's own quote of the reference
 * decides when it is one of the candidates; otherwise the candidate the message names most surely.
 * When the container's own image is among the best, or nothing is named, it is the container's image.
 */
export function failingReference(pod: V1Pod, container: V1Container, ownImage: string, message: string): FailingReference {
  const own: FailingReference = { image: ownImage, volume: undefined };
  const volumes = mountedImageVolumes(pod, container).filter((v) => v.image !== ownImage);
  if (volumes.length === 0) return own;
  for (const quote of KUBELET_QUOTES) {
    const quoted = quote.exec(message)?.[1];
    if (quoted === undefined) continue;
    if (quoted === ownImage) return own;
    const volume = volumes.findLast((v) => v.image === quoted);
    if (volume) return volume;
  }
  const ownLevel = namedHow(message, ownImage);
  const levels = volumes.map((v) => namedHow(message, v.image));
  const best = Math.max(...levels);
  if (best === 0 || ownLevel >= best) return own;
  return volumes[levels.lastIndexOf(best)]!;
}
