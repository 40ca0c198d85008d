/** Runs `work` over `items` with at most `limit` in flight, keeping input order. */
export function mapBounded<I, O>(items: readonly I[], limit: number, work: (item: I) => Promise<O>): Promise<O[]> {
  const gate = limited(limit);
  return Promise.all(items.map((item) => gate(() => work(item))));
}

/** A gate that lets at most `limit` of the calls given to it run at once; the others wait their turn. */
export function limited(limit: number): <T>(work: () => Promise<T>) => Promise<T> {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async (work) => {
    // A finishing call hands its place straight to the next waiting one, so a call arriving in
    // between cannot take it too.
    if (running < limit) running += 1;
    else await new Promise<void>((resolve) => waiting.push(resolve));
    try {
      return await work();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else running -= 1;
    }
  };
}
