// Evidence that the cause of a stuck container is gone, from the API alone (docs/how-it-works.md
// "Healing"). Guessing is not evidence: only these, and only for these classes.
// - auth: its ServiceAccount now lists a pull secret the pod lacks, and its Job's pod template
//   names none of its own (the ServiceAccount admission plugin copies the ServiceAccount's
//   secrets into a pod only when the pod names none, and only when the pod is created: the pod
//   never gets them, a new one does); or a pull Secret the pod names was created or changed after
//   the pod got stuck (the kubelet would use it at its next try, after a back-off of up to 5 minutes).
// - transient, stalled: the registry host is healthy again: the outage breaker had held a Job for
//   that host and no longer trips for it; or a Running pod in the namespace started a container
//   of the same reference (with an imageID) after this one got stuck.
// Pure: the reads it judges from are made by observe/heal-reads.ts, only where needed.
import { registryHost } from '../classify/reference.ts';
import type { JobView, StuckContainer } from '../model.ts';
import { ANNOTATIONS } from '../policy/annotations.ts';
import { tripFor } from './outage.ts';
import type { OutageAssessment } from './types.ts';

/** A read that failed, said as the audit says it. */
export interface ReadFailure {
  error: string;
}

export interface ServiceAccountFacts {
  /** Its imagePullSecrets, by name; undefined when it does not exist. */
  pullSecrets: string[] | undefined;
}

export interface SecretFacts {
  exists: boolean;
  created?: Date;
  /** The latest time any field manager wrote it (metadata.managedFields[].time): a Secret keeps no other change time. */
  changed?: Date;
}

/** Per image reference, the latest Running container of it with an imageID, and when it started. */
export interface PulledImages {
  byImage: ReadonlyMap<string, { pod: string; startedAt: Date }>;
  /** Not every Running pod was read (the read is bounded): a reference missing from it proves nothing. */
  partial: boolean;
}

/** What observe/heal-reads.ts read, keyed `namespace/name` (pulled: by namespace). */
export interface HealReads {
  serviceAccounts: ReadonlyMap<string, ServiceAccountFacts | ReadFailure>;
  secrets: ReadonlyMap<string, SecretFacts | ReadFailure>;
  pulled: ReadonlyMap<string, PulledImages | ReadFailure>;
}

export const NO_READS: HealReads = { serviceAccounts: new Map(), secrets: new Map(), pulled: new Map() };

/** A registry host the breaker held a Job for, as the Job records it (annotation imagepull-sweeper/outage-held). */
export interface OutageHold {
  host: string;
  /** RFC 3339: since when. */
  at: string;
  job: string;
}

/** The reads a container's evidence needs, given what is already known (the breaker's holds). */
export interface EvidenceNeeds {
  serviceAccount?: string;
  secrets: string[];
  pulledIn?: string;
}

export type Evidence = { found: true; text: string } | { found: false; text: string; warning?: string };

export const key = (namespace: string, name: string): string => `${namespace}/${name}`;

const serviceAccountOf = (c: StuckContainer): string => c.heal?.serviceAccount ?? 'default';
const pullSecretsOf = (c: StuckContainer): readonly string[] => c.heal?.pullSecrets ?? [];
/** A pod names at most this many pull secrets whose change times are read. */
export const SECRETS_READ_PER_POD = 8;

/** What `c`'s evidence would be read from. */
export function evidenceNeeds(c: StuckContainer, job: Pick<JobView, 'templatePullSecrets'>, holds: readonly OutageHold[]): EvidenceNeeds {
  if (c.pullClass === 'auth') {
    return {
      ...(job.templatePullSecrets ? {} : { serviceAccount: serviceAccountOf(c) }),
      secrets: pullSecretsOf(c).slice(0, SECRETS_READ_PER_POD),
    };
  }
  const held = holds.some((h) => h.host === registryHost(c.image));
  return held || c.volume !== undefined ? { secrets: [] } : { secrets: [], pulledIn: c.namespace };
}

/** The outage breaker's holds that the Jobs of this sweep record. */
export function outageHolds(jobs: Iterable<Pick<JobView, 'name' | 'annotations'>>): OutageHold[] {
  const holds: OutageHold[] = [];
  for (const job of jobs) {
    const held = readOutageHold(job.annotations[ANNOTATIONS.outageHeld]);
    if (held) holds.push({ ...held, job: job.name });
  }
  return holds;
}

/** `HOST AT`: the annotation's value, written with the report of a Job the breaker holds (act/report-job.ts). */
export function formatOutageHold(host: string, at: string): string {
  return `${host} ${at}`;
}

function readOutageHold(raw: string | undefined): { host: string; at: string } | undefined {
  const [host, at, ...rest] = (raw ?? '').trim().split(' ');
  return host && at && rest.length === 0 ? { host, at } : undefined;
}

/** Whether `c`'s cause is gone, and the words for the audit line and the Event. */
export function findEvidence(
  c: StuckContainer,
  job: Pick<JobView, 'templatePullSecrets'>,
  reads: HealReads,
  context: { holds: readonly OutageHold[]; outage: OutageAssessment },
): Evidence {
  return c.pullClass === 'auth' ? authEvidence(c, job, reads) : registryEvidence(c, reads, context);
}

function authEvidence(c: StuckContainer, job: Pick<JobView, 'templatePullSecrets'>, reads: HealReads): Evidence {
  const notes: string[] = [];
  const warnings: string[] = [];
  const has = new Set(pullSecretsOf(c));
  const stuckAt = iso(c.stuckSince);
  if (job.templatePullSecrets) {
    notes.push('its pod template names its own pull secrets, so a new pod would not get its ServiceAccount’s');
  } else {
    const name = serviceAccountOf(c);
    const sa = reads.serviceAccounts.get(key(c.namespace, name));
    if (sa === undefined) notes.push(`ServiceAccount ${name} was not read`);
    else if ('error' in sa) warnings.push(`ServiceAccount ${name} could not be read (${sa.error})`);
    else if (sa.pullSecrets === undefined) notes.push(`ServiceAccount ${name} does not exist`);
    else {
      const missing = sa.pullSecrets.filter((s) => !has.has(s));
      if (missing.length > 0) {
        const which = missing.map((s) => `pull secret ${s}`).join(', ');
        return { found: true, text: `ServiceAccount ${name} now lists ${which}, which pod ${c.pod} lacks: a new pod gets it` };
      }
      notes.push(`ServiceAccount ${name} lists no pull secret pod ${c.pod} lacks`);
    }
  }
  const unchanged: string[] = [];
  for (const name of pullSecretsOf(c).slice(0, SECRETS_READ_PER_POD)) {
    const secret = reads.secrets.get(key(c.namespace, name));
    if (secret === undefined) continue;
    if ('error' in secret) {
      warnings.push(`pull secret ${name} could not be read (${secret.error})`);
      continue;
    }
    if (!secret.exists) {
      notes.push(`pull secret ${name} does not exist`);
      continue;
    }
    if (secret.created && secret.created > c.stuckSince) {
      return { found: true, text: `pull secret ${name} was created at ${iso(secret.created)}, after pod ${c.pod} got stuck at ${stuckAt}` };
    }
    if (secret.changed && secret.changed > c.stuckSince) {
      return { found: true, text: `pull secret ${name} was changed at ${iso(secret.changed)}, after pod ${c.pod} got stuck at ${stuckAt}` };
    }
    unchanged.push(name);
  }
  if (unchanged.length > 0) notes.push(`pull secret(s) ${unchanged.join(', ')} unchanged since it got stuck`);
  if (pullSecretsOf(c).length === 0 && job.templatePullSecrets) notes.push('it names no pull secret');
  return noEvidence(notes, warnings);
}

function registryEvidence(
  c: StuckContainer,
  reads: HealReads,
  context: { holds: readonly OutageHold[]; outage: OutageAssessment },
): Evidence {
  const host = registryHost(c.image);
  const hold = context.holds.find((h) => h.host === host);
  const notes: string[] = [];
  if (hold) {
    const trip = tripFor(context.outage, { image: c.image, pullClass: 'transient' });
    if (!trip) {
      return {
        found: true,
        text: `the outage breaker held registry ${host} (Job ${hold.job}, since ${hold.at}) and reads it healthy now`,
      };
    }
    notes.push(`the outage breaker still holds registry ${host}`);
  }
  if (c.volume !== undefined)
    return noEvidence([...notes, `image volume ${c.volume}: only the outage breaker tells its registry is back`], []);
  const pulled = reads.pulled.get(c.namespace);
  if (pulled === undefined) return noEvidence(notes, []);
  if ('error' in pulled) return noEvidence(notes, [`the Running pods of ${c.namespace} could not be listed (${pulled.error})`]);
  const seen = pulled.byImage.get(c.image);
  if (seen && seen.startedAt > c.stuckSince) {
    return {
      found: true,
      text: `pod ${seen.pod} started ${c.image} at ${iso(seen.startedAt)}, after pod ${c.pod} got stuck at ${iso(c.stuckSince)}: registry ${host} serves it`,
    };
  }
  notes.push(`no Running pod in ${c.namespace}${pulled.partial ? ' (of those read)' : ''} started ${c.image} since it got stuck`);
  return noEvidence(notes, []);
}

function noEvidence(notes: string[], warnings: string[]): Evidence {
  const text = [...warnings, ...notes].join('; ') || 'nothing says its cause is gone';
  return warnings.length > 0 ? { found: false, text, warning: warnings.join('; ') } : { found: false, text };
}

function iso(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
