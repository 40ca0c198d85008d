// The watch on a `--policy-file`: the counterpart of policy-watch.ts when the policy is a file.
// It polls: a stat of the path a second (symlinks followed), and the content only when the stat
// changed. fs.watch would miss what real edits do: an editor renames a new file over the old one,
// and a ConfigMap mounted in a pod is a symlink through `..data`, which the kubelet swaps to a new
// directory; an inotify watch stays on the old inode. A stat a second costs nothing measurable.
// A change is reported once the stat has held still for SETTLE_MS (not halfway through a write)
// and the content differs from the last reported one (a `touch` is no edit), so `onChange`
// comes within about POLL_MS + SETTLE_MS of the edit.
import { createHash } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { readPolicyFile } from '../policy/load.ts';

/** How often the file is looked at while nothing changes. */
export const POLL_MS = 1000;
/** How soon it is looked at again after its stat changed, to see the change has ended. */
export const SETTLE_MS = 250;

/** How the file is looked at (fingerprints, so a test can stand in for the file system). */
export interface FileProbe {
  /** Where the path leads now and that file's size and times, or why there is no file; cheap. */
  metadata(path: string): Promise<string>;
  /** The content's digest, or why it could not be read. */
  content(path: string): Promise<string>;
}

const errorCode = (error: unknown) => (error as NodeJS.ErrnoException).code ?? (error as Error).message;

export const fileSystemProbe: FileProbe = {
  async metadata(path) {
    try {
      const s = await stat(path, { bigint: true });
      return `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`;
    } catch (error) {
      return `absent:${errorCode(error)}`;
    }
  },
  async content(path) {
    try {
      return createHash('sha256')
        .update(await readPolicyFile(path))
        .digest('hex');
    } catch (error) {
      return `unreadable:${errorCode(error)}`;
    }
  },
};

export type PollResult = 'same' | 'settling' | 'changed';

/** Tells, one poll at a time, whether the policy file changed since the last change reported. */
export class PolicyFileChanges {
  private known: { metadata: string; content: string } | undefined;
  /** The stat seen at the last poll when it differed from the known one: the change may be in progress. */
  private moving: string | undefined;

  constructor(
    private readonly path: string,
    private readonly probe: FileProbe = fileSystemProbe,
  ) {}

  /** The first poll only takes note of the file (the start sweep reads the policy anyway). */
  async poll(): Promise<PollResult> {
    const metadata = await this.probe.metadata(this.path);
    if (!this.known) {
      this.known = { metadata, content: await this.probe.content(this.path) };
      return 'same';
    }
    if (metadata === this.known.metadata) {
      this.moving = undefined;
      return 'same';
    }
    if (metadata !== this.moving) {
      this.moving = metadata;
      return 'settling';
    }
    this.moving = undefined;
    const content = await this.probe.content(this.path);
    const changed = content !== this.known.content;
    this.known = { metadata, content };
    return changed ? 'changed' : 'same';
  }
}

export interface PolicyFileWatchOptions {
  path: string;
  sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  onChange: () => void;
  probe?: FileProbe;
}

/** Polls until `signal` aborts; every edit, deletion or re-creation of the file calls `onChange`. */
export async function watchPolicyFile(options: PolicyFileWatchOptions, signal: AbortSignal): Promise<void> {
  const changes = new PolicyFileChanges(options.path, options.probe);
  while (!signal.aborted) {
    const seen = await changes.poll();
    if (seen === 'changed' && !signal.aborted) options.onChange();
    await options.sleep(seen === 'settling' ? SETTLE_MS : POLL_MS, signal);
  }
}
