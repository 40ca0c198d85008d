/** A sleep that ends early when `notify` is called (a watch event) or the signal aborts. */
export class Wakeup {
  private waiting: (() => void) | undefined;
  private notified = false;

  notify(): void {
    this.notified = true;
    this.waiting?.();
  }

  wait(ms: number, signal: AbortSignal): Promise<void> {
    if (this.notified || signal.aborted) {
      this.notified = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.waiting = undefined;
        this.notified = false;
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, ms));
      this.waiting = done;
      signal.addEventListener('abort', done, { once: true });
    });
  }
}
