// The `--policy-file` watch of `run --watch` (src/watch/policy-file-watch.ts): each way a file
// really changes is seen, on a real file system, one poll at a time (no real seconds waited).
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { POLL_MS, PolicyFileChanges, SETTLE_MS, watchPolicyFile, type FileProbe } from '../../src/watch/policy-file-watch.ts';

const IGNORE = 'defaults: { action: ignore }\n';
const FAIL = 'defaults: { grace: { permanent: 30s } }\n';

const root = mkdtempSync(join(tmpdir(), 'ips-policy-file-'));
after(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
function tempDir(): string {
  const dir = join(root, String((dirs += 1)));
  mkdirSync(dir);
  return dir;
}

/** A detector on `path` that has taken note of the file as it is now. */
async function watched(path: string): Promise<PolicyFileChanges> {
  const changes = new PolicyFileChanges(path);
  assert.equal(await changes.poll(), 'same');
  return changes;
}

/** Two polls: the first sees the stat move, the second that it held still. */
async function twoPolls(changes: PolicyFileChanges): Promise<string[]> {
  return [await changes.poll(), await changes.poll()];
}

describe('PolicyFileChanges: how a policy file really changes', () => {
  it('reports nothing while nothing changes', async () => {
    const path = join(tempDir(), 'policy.yaml');
    writeFileSync(path, IGNORE);
    const changes = await watched(path);
    for (let i = 0; i < 5; i += 1) assert.equal(await changes.poll(), 'same');
  });

  it('sees an in-place write once it holds still, and only once', async () => {
    const path = join(tempDir(), 'policy.yaml');
    writeFileSync(path, IGNORE);
    const changes = await watched(path);
    writeFileSync(path, FAIL);
    assert.deepEqual(await twoPolls(changes), ['settling', 'changed']);
    assert.equal(await changes.poll(), 'same');
  });

  it('sees an in-place write of the same size (the times moved, not the inode or the size)', async () => {
    const path = join(tempDir(), 'policy.yaml');
    writeFileSync(path, 'defaults: { action: fail }\n');
    const changes = await watched(path);
    writeFileSync(path, 'defaults: { action: skip }\n');
    // As the clock would have moved between two edits, however coarse the file system's timestamps.
    utimesSync(path, new Date(), new Date(Date.now() + 5_000));
    assert.deepEqual(await twoPolls(changes), ['settling', 'changed']);
  });

  it('reports no change for a touch: the content is the same', async () => {
    const path = join(tempDir(), 'policy.yaml');
    writeFileSync(path, IGNORE);
    const changes = await watched(path);
    utimesSync(path, new Date(), new Date(Date.now() + 5_000));
    assert.deepEqual(await twoPolls(changes), ['settling', 'same']);
    assert.equal(await changes.poll(), 'same');
  });

  it("sees an editor's write to a temporary file renamed over the policy", async () => {
    const dir = tempDir();
    const path = join(dir, 'policy.yaml');
    writeFileSync(path, IGNORE);
    const changes = await watched(path);
    writeFileSync(join(dir, '.policy.yaml.swp'), FAIL);
    renameSync(join(dir, '.policy.yaml.swp'), path);
    assert.deepEqual(await twoPolls(changes), ['settling', 'changed']);
  });

  it("sees a mounted ConfigMap's update: the kubelet swaps the ..data symlink to a new directory", async () => {
    const dir = tempDir();
    // The kubelet's layout: policy.yaml -> ..data/policy.yaml, ..data -> ..<timestamp>/.
    const version = (name: string, text: string) => {
      mkdirSync(join(dir, name));
      writeFileSync(join(dir, name, 'policy.yaml'), text);
    };
    version('..2026_12_04_10_00_00.1', IGNORE);
    symlinkSync('..2026_12_04_10_00_00.1', join(dir, '..data'));
    symlinkSync('..data/policy.yaml', join(dir, 'policy.yaml'));
    const changes = await watched(join(dir, 'policy.yaml'));
    // Its update: the new version's directory, a new symlink renamed over ..data, the old directory removed.
    version('..2026_12_04_10_01_00.2', FAIL);
    symlinkSync('..2026_12_04_10_01_00.2', join(dir, '..data_tmp'));
    renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
    rmSync(join(dir, '..2026_12_04_10_00_00.1'), { recursive: true });
    assert.deepEqual(await twoPolls(changes), ['settling', 'changed']);
    assert.equal(await changes.poll(), 'same');
  });

  it('sees a deletion, and then the re-creation', async () => {
    const path = join(tempDir(), 'policy.yaml');
    writeFileSync(path, IGNORE);
    const changes = await watched(path);
    unlinkSync(path);
    assert.deepEqual(await twoPolls(changes), ['settling', 'changed']);
    assert.equal(await changes.poll(), 'same');
    writeFileSync(path, IGNORE);
    assert.deepEqual(await twoPolls(changes), ['settling', 'changed']);
  });

  it('waits while the file is still being written', async () => {
    const path = join(tempDir(), 'policy.yaml');
    writeFileSync(path, IGNORE);
    const changes = await watched(path);
    let text = '';
    for (const line of ['defaults:\n', '  grace:\n', '    permanent: 30s\n']) {
      writeFileSync(path, (text += line));
      assert.equal(await changes.poll(), 'settling');
    }
    assert.equal(await changes.poll(), 'changed');
  });
});

describe('watchPolicyFile: the polling loop', () => {
  /** A file whose fingerprints follow a script, one entry a poll: [metadata, content]. */
  function scripted(script: [string, string][]): FileProbe & { polls: () => number } {
    let polls = 0;
    let current: [string, string] = script[0]!;
    return {
      metadata: () => {
        current = script[Math.min(polls, script.length - 1)]!;
        polls += 1;
        return Promise.resolve(current[0]);
      },
      content: () => Promise.resolve(current[1]),
      polls: () => polls,
    };
  }

  it('polls every POLL_MS, every SETTLE_MS while a change settles, calls onChange once an edit, and stops when aborted', async () => {
    const probe = scripted([
      ['m1', 'c1'],
      ['m1', 'c1'],
      ['m2', 'c2'],
      ['m2', 'c2'],
      ['m2', 'c2'],
      ['m3', 'c2'], // touched: same content
      ['m3', 'c2'],
      ['absent', 'unreadable'],
      ['absent', 'unreadable'],
      ['absent', 'unreadable'],
    ]);
    const stop = new AbortController();
    const sleeps: number[] = [];
    const changedAtPoll: number[] = [];
    const sleep = (ms: number) => {
      sleeps.push(ms);
      if (probe.polls() === 10) stop.abort();
      return Promise.resolve();
    };
    await watchPolicyFile({ path: 'policy.yaml', sleep, probe, onChange: () => changedAtPoll.push(probe.polls()) }, stop.signal);
    assert.deepEqual(changedAtPoll, [4, 9]);
    assert.deepEqual(sleeps, [POLL_MS, POLL_MS, SETTLE_MS, POLL_MS, POLL_MS, SETTLE_MS, POLL_MS, SETTLE_MS, POLL_MS, POLL_MS]);
    assert.equal(probe.polls(), 10);
  });

  it('returns at once when stopped before it starts', async () => {
    const stop = new AbortController();
    stop.abort();
    let polled = false;
    const probe: FileProbe = {
      metadata: () => ((polled = true), Promise.resolve('m')),
      content: () => Promise.resolve('c'),
    };
    await watchPolicyFile(
      { path: 'policy.yaml', sleep: () => Promise.resolve(), probe, onChange: () => assert.fail('no change') },
      stop.signal,
    );
    assert.equal(polled, false);
  });
});
