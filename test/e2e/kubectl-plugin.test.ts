// The kubectl plugin: the packed package installs `kubectl-imagepull_sweeper` (krew's naming:
// `kubectl imagepull-sweeper` runs it) next to `imagepull-sweeper`, and run under that name the
// program calls itself `kubectl imagepull-sweeper` in its usage. No cluster needed.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { ensureBuilt, exec, REPO } from '../support/cli.ts';

describe('the kubectl plugin', () => {
  let unpacked: string;
  let bin: Record<string, string>;
  let binDir: string;

  before(async () => {
    ensureBuilt();
    const dir = mkdtempSync(join(tmpdir(), 'ips-pack-'));
    const pack = await exec('npm', ['pack', '--json', '--pack-destination', dir], { cwd: REPO });
    assert.equal(pack.code, 0, pack.stderr);
    const filename = (JSON.parse(pack.stdout) as { filename: string }[])[0]!.filename;
    const untar = await exec('tar', ['-xzf', join(dir, filename), '-C', dir]);
    assert.equal(untar.code, 0, untar.stderr);
    unpacked = join(dir, 'package');
    bin = (JSON.parse(readFileSync(join(unpacked, 'package.json'), 'utf8')) as { bin: Record<string, string> }).bin;
    // What npm's bin-links does on install: one link per bin entry, in a directory on PATH.
    binDir = join(dir, 'bin');
    mkdirSync(binDir);
    for (const [name, target] of Object.entries(bin)) symlinkSync(join(unpacked, target), join(binDir, name));
  });

  it('the package installs both commands, from a file it ships with a node shebang', () => {
    assert.deepEqual(Object.keys(bin).sort(), ['imagepull-sweeper', 'kubectl-imagepull_sweeper']);
    assert.equal(bin['kubectl-imagepull_sweeper'], bin['imagepull-sweeper']);
    const entry = join(unpacked, bin['kubectl-imagepull_sweeper']!);
    assert.ok(existsSync(entry), `${entry} is in the package`);
    assert.match(readFileSync(entry, 'utf8'), /^#!\/usr\/bin\/env node\n/);
  });

  it('the krew manifest template names files the package has, and its entry point as the bin', () => {
    const manifest = parseYaml(readFileSync(join(REPO, 'plugins', 'krew', 'imagepull-sweeper.yaml'), 'utf8')) as {
      kind: string;
      metadata: { name: string };
      spec: { platforms: { files: { from: string; to: string }[]; bin: string }[] };
    };
    assert.equal(manifest.kind, 'Plugin');
    assert.equal(manifest.metadata.name, 'imagepull-sweeper');
    for (const platform of manifest.spec.platforms) {
      for (const f of platform.files) assert.ok(existsSync(join(unpacked, '..', f.from)), `${f.from} is in the archive`);
      const installed = platform.files.find((f) => platform.bin.startsWith(`${f.to.replace(/^\.$/, '')}`) && f.to !== '.');
      assert.ok(installed, `${platform.bin} comes from the archive`);
      assert.equal(
        join(installed.from.replace(/^package\//, ''), platform.bin.slice(installed.to.length)),
        bin['kubectl-imagepull_sweeper']!.replace(/^\.\//, ''),
      );
    }
  });

  it('found on PATH as kubectl finds plugins, it names itself `kubectl imagepull-sweeper`', async () => {
    const env = { ...process.env, PATH: `${binDir}:${process.env.PATH ?? ''}`, KUBECONFIG: '/nonexistent-kubeconfig' };
    const help = await exec('kubectl-imagepull_sweeper', ['--help'], { env });
    assert.equal(help.code, 0, help.stderr);
    assert.match(help.stdout, /^Usage: kubectl imagepull-sweeper \[options\] \[command\]/);
    const sweepHelp = await exec('kubectl-imagepull_sweeper', ['sweep', '--help'], { env });
    assert.match(sweepHelp.stdout, /^Usage: kubectl imagepull-sweeper sweep \[options\]/);
    assert.match(sweepHelp.stdout, /--dry-run/);
    const plain = await exec('imagepull-sweeper', ['--help'], { env });
    assert.match(plain.stdout, /^Usage: imagepull-sweeper \[options\] \[command\]/);
    // Without a cluster: the usual answer (exit 3, or 2 for no kubeconfig), not a crash.
    const sweep = await exec('kubectl-imagepull_sweeper', ['sweep', '--dry-run'], { env });
    assert.ok(sweep.code === 2 || sweep.code === 3, `exit ${sweep.code}: ${sweep.stderr}`);
  });
});
