// The ServiceAccounts `run --watch` follows while its policy heals (docs/how-it-works.md
// "Event-driven mode"): a ServiceAccount that comes to list a pull secret it did not list before is
// evidence for the auth-stuck pods that run under it, so their Jobs are judged at once instead of
// at their next due time. Only the names of each ServiceAccount's pull secrets are kept.
import type { V1ServiceAccount } from '@kubernetes/client-node';
import type { ReflectorHandler } from './reflector.ts';

/** Told of a ServiceAccount that lists a pull secret it did not list before. */
export type PullSecretGiven = (namespace: string, serviceAccount: string) => void;

export class ServiceAccountSecrets {
  /** uid → its pull secrets' names. */
  private readonly known = new Map<string, ReadonlySet<string>>();

  constructor(private readonly onGiven: PullSecretGiven) {}

  handler(): ReflectorHandler<V1ServiceAccount> {
    let listed: Set<string> | undefined;
    return {
      listStarted: () => {
        listed = new Set();
      },
      // A list (the first, or after an expired watch) tells of what changed since as events do.
      listed: (sa) => {
        listed?.add(sa.metadata?.uid ?? '');
        this.seen(sa);
      },
      listEnded: () => {
        for (const uid of this.known.keys()) if (!listed?.has(uid)) this.known.delete(uid);
        listed = undefined;
      },
      event: (type, sa) => {
        if (type === 'DELETED') this.known.delete(sa.metadata?.uid ?? '');
        else this.seen(sa);
      },
    };
  }

  private seen(sa: V1ServiceAccount): void {
    const uid = sa.metadata?.uid ?? '';
    const before = this.known.get(uid) ?? new Set<string>();
    const now = pullSecretNames(sa);
    this.known.set(uid, now);
    if ([...now].some((name) => !before.has(name))) this.onGiven(sa.metadata?.namespace ?? '', sa.metadata?.name ?? '');
  }
}

function pullSecretNames(sa: V1ServiceAccount): ReadonlySet<string> {
  return new Set((sa.imagePullSecrets ?? []).map((s) => s.name ?? '').filter((name) => name !== ''));
}
