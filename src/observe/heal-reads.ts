// The reads healing's evidence comes from (judge/heal-evidence.ts), only those planHealReads
// named: each ServiceAccount and each pull Secret's metadata once (a GET each), and each
// namespace's Running pods once (a bounded paged LIST), at most `concurrency` at a time. A read
// that fails is kept as its failure: it costs that evidence, never the sweep.
import type { V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import { mapBounded } from '../concurrency.ts';
import type { HealNeeds } from '../judge/heal.ts';
import type { HealReads, PulledImages, ReadFailure, SecretFacts, ServiceAccountFacts } from '../judge/heal-evidence.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { failureText, tryRead } from '../kube/write-outcome.ts';
import { toDate } from '../time.ts';

/** Running pods read per namespace: pages of this many, at most RUNNING_PAGES of them. */
export const RUNNING_PAGE = 250;
export const RUNNING_PAGES = 4;

export async function readHealEvidence(gateway: KubeGateway, needs: HealNeeds, concurrency: number): Promise<HealReads> {
  const serviceAccounts = new Map<string, ServiceAccountFacts | ReadFailure>();
  const secrets = new Map<string, SecretFacts | ReadFailure>();
  const pulled = new Map<string, PulledImages | ReadFailure>();
  const reads: (() => Promise<void>)[] = [
    ...[...needs.serviceAccounts].map((k) => async () => {
      const [namespace, name] = split(k);
      const read = await tryRead(() => gateway.readServiceAccount(namespace, name));
      serviceAccounts.set(
        k,
        read.found
          ? { pullSecrets: (read.value.imagePullSecrets ?? []).map((s) => s.name ?? '').filter((n) => n !== '') }
          : read.gone
            ? { pullSecrets: undefined }
            : { error: failureText(read.failure) },
      );
    }),
    ...[...needs.secrets].map((k) => async () => {
      const [namespace, name] = split(k);
      const read = await tryRead(() => gateway.readSecretMetadata(namespace, name));
      if (!read.found) {
        secrets.set(k, read.gone ? { exists: false } : { error: failureText(read.failure) });
        return;
      }
      const created = toDate(read.value.creationTimestamp);
      const written = (read.value.managedFields ?? []).map((f) => toDate(f.time)).filter((d): d is Date => d !== undefined);
      const changed = written.reduce<Date | undefined>((a, b) => (a === undefined || b > a ? b : a), undefined);
      secrets.set(k, { exists: true, ...(created ? { created } : {}), ...(changed ? { changed } : {}) });
    }),
    ...[...needs.pulledIn].map((namespace) => async () => {
      pulled.set(namespace, await readPulled(gateway, namespace));
    }),
  ];
  await mapBounded(reads, concurrency, (read) => read());
  return { serviceAccounts, secrets, pulled };
}

function split(k: string): [string, string] {
  const at = k.indexOf('/');
  return [k.slice(0, at), k.slice(at + 1)];
}

/** The namespace's Running pods, each page reduced to the references they started and when. */
async function readPulled(gateway: KubeGateway, namespace: string): Promise<PulledImages | ReadFailure> {
  const byImage = new Map<string, { pod: string; startedAt: Date }>();
  let continueToken: string | undefined;
  for (let page = 0; page < RUNNING_PAGES; page++) {
    const read = await tryRead(() =>
      gateway.listPods({
        namespace,
        fieldSelector: 'status.phase=Running',
        limit: RUNNING_PAGE,
        ...(continueToken ? { continueToken } : {}),
      }),
    );
    if (!read.found) return { error: failureText(read.failure) };
    for (const pod of read.value.items) notePulled(pod, byImage);
    continueToken = read.value.continueToken;
    if (!continueToken) return { byImage, partial: false };
  }
  return { byImage, partial: true };
}

/** Each container of the pod that started with an imageID: under its spec's reference and the runtime's. */
export function notePulled(pod: V1Pod, byImage: Map<string, { pod: string; startedAt: Date }>): void {
  const specs = new Map([...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].map((c) => [c.name, c.image]));
  const statuses: V1ContainerStatus[] = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])];
  for (const s of statuses) {
    if (!s.imageID) continue;
    const startedAt = toDate(s.state?.running?.startedAt ?? s.state?.terminated?.startedAt ?? undefined);
    if (!startedAt) continue;
    for (const image of new Set([specs.get(s.name), s.image])) {
      if (!image) continue;
      const known = byImage.get(image);
      if (!known || startedAt > known.startedAt) byImage.set(image, { pod: pod.metadata?.name ?? '', startedAt });
    }
  }
}
