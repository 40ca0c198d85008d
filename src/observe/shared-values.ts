// One copy of each value that stuck pods repeat. Every pod's answer is parsed into strings and
// objects of its own; the pods of one missing image share their namespace, image, reason,
// message and owner kind, pods stuck in the same second share that time (a status's times have
// whole seconds), and the pods of one template share their requests (what each copy costs:
// docs/performance.md "Memory"). The shared values are never changed in place.
import type { PodCapacity, StuckContainer } from '../model.ts';

export class SharedValues {
  private readonly texts = new Map<string, string>();
  private readonly times = new Map<number, Date>();
  private readonly capacities = new Map<string, PodCapacity>();

  /** How many values it keeps (an owner that outlives many pods starts a new one past a bound). */
  get size(): number {
    return this.texts.size + this.times.size + this.capacities.size;
  }

  /** The container, its repeated texts and its time replaced in place by the shared copies. */
  readonly container = (c: StuckContainer): StuckContainer => {
    c.namespace = this.text(c.namespace);
    c.image = this.text(c.image);
    c.reason = this.text(c.reason);
    c.message = this.text(c.message);
    c.stuckSince = this.time(c.stuckSince);
    if (c.controller) {
      c.controller.apiVersion = this.text(c.controller.apiVersion);
      c.controller.kind = this.text(c.controller.kind);
    }
    return c;
  };

  time<T extends Date | undefined>(date: T): T {
    if (date === undefined) return date;
    const ms = date.getTime();
    const known = this.times.get(ms);
    if (known) return known as T;
    this.times.set(ms, date);
    return date;
  }

  capacity(capacity: PodCapacity): PodCapacity {
    let key = String(capacity.heldSince?.getTime() ?? '');
    for (const name in capacity.requests) key += `|${name}=${capacity.requests[name]}`;
    const known = this.capacities.get(key);
    if (known) return known;
    const shared = { requests: capacity.requests, heldSince: this.time(capacity.heldSince) };
    this.capacities.set(key, shared);
    return shared;
  }

  private text<T extends string>(text: T): T {
    const known = this.texts.get(text);
    if (known !== undefined) return known as T;
    this.texts.set(text, text);
    return text;
  }
}
