// The kubectl conventions of the command line (docs/contract.md): -n, -A, -o, completion, version.
// Offline: nothing here reaches a cluster.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { runCli } from '../../src/cli/program.ts';

async function cli(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const sink = (add: (s: string) => void) =>
    new Writable({
      write: (chunk: Buffer, _e, done) => {
        add(chunk.toString());
        done();
      },
    });
  const code = await runCli(argv, {
    stdout: sink((s) => (stdout += s)),
    stderr: sink((s) => (stderr += s)),
    readStdin: async () => '',
    onStopSignal: () => {},
  });
  return { code, stdout, stderr };
}

const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
const dir = mkdtempSync(join(tmpdir(), 'ips-cli-'));
const POLICY = join(dir, 'policy.yaml');
writeFileSync(POLICY, 'rules:\n  - name: ci\n    namespaces: ["ci-*"]\n    grace: { permanent: 30s }\n');

describe('kubectl conventions', () => {
  it('version prints the version, as --version does', async () => {
    const [command, flag] = [await cli('version'), await cli('--version')];
    assert.deepEqual([command.code, command.stdout], [0, `${VERSION}\n`]);
    assert.equal(flag.stdout, command.stdout);
  });

  it('-n and -o are --namespace and --output', async () => {
    const short = await cli('policy', 'explain', '-n', 'ci-42', '--policy-file', POLICY, '-o', 'json');
    const long = await cli('policy', 'explain', '--namespace', 'ci-42', '--policy-file', POLICY, '--output', 'json');
    assert.equal(short.code, 0, short.stderr);
    assert.equal(short.stdout, long.stdout);
    assert.match(short.stdout, /"ci"/);
  });

  it('-A with -n is bad usage (exit 2), before any connection', async () => {
    const r = await cli('sweep', '-A', '-n', 'ci-42', '--kubeconfig', join(dir, 'none'));
    assert.equal(r.code, 2);
    assert.match(r.stderr, /'-A, --all-namespaces' cannot be used with option '-n, --namespace/);
  });

  it('-o takes text or json only', async () => {
    const r = await cli('sweep', '-o', 'yaml');
    assert.equal(r.code, 2);
    assert.match(r.stderr, /Allowed choices are text, json/);
  });

  it('run --help names the time zone default once', async () => {
    const r = await cli('run', '--help');
    assert.equal(r.code, 0);
    assert.equal(r.stdout.match(/default: "?UTC/g)?.length, 1, r.stdout);
  });

  it('completion rejects an unknown shell', async () => {
    const r = await cli('completion', 'tcsh');
    assert.equal(r.code, 2);
    assert.match(r.stderr, /Allowed choices are bash, zsh, fish/);
  });
});

describe('completion bash', () => {
  /** Sources the script in a real bash and completes `words` (the last one being typed). */
  async function complete(...words: string[]): Promise<string[]> {
    const script = join(dir, 'completion.bash');
    writeFileSync(script, (await cli('completion', 'bash')).stdout);
    const probe = `source ${JSON.stringify(script)}; COMP_WORDS=(${words.map((w) => JSON.stringify(w)).join(' ')}); COMP_CWORD=${words.length - 1}; _imagepull_sweeper; printf '%s\\n' "\${COMPREPLY[@]}"`;
    return execFileSync('bash', ['--norc', '-c', probe], { encoding: 'utf8' }).split('\n').filter(Boolean);
  }

  it('completes commands, subcommands, options and their values', async () => {
    assert.deepEqual(await complete('imagepull-sweeper', 'po'), ['policy']);
    assert.deepEqual(await complete('imagepull-sweeper', 'policy', ''), ['validate', 'explain', 'schema', '--help']);
    assert.deepEqual(await complete('imagepull-sweeper', 'sweep', '-o', ''), ['text', 'json']);
    assert.deepEqual(await complete('imagepull-sweeper', 'sweep', '--dry-run', '--all'), ['--all-namespaces']);
    assert.deepEqual(await complete('imagepull-sweeper', 'sweep', '--dry-run', ''), ['client', 'server'], 'its optional value');
    assert.deepEqual(await complete('imagepull-sweeper', 'completion', ''), ['bash', 'zsh', 'fish', '--help']);
    assert.ok((await complete('imagepull-sweeper', '')).includes('version'));
  });
});

describe('completion zsh and fish', () => {
  it('zsh loads the bash function through bashcompinit', async () => {
    const r = await cli('completion', 'zsh');
    assert.match(r.stdout, /^#compdef imagepull-sweeper kubectl-imagepull_sweeper\n/);
    assert.match(r.stdout, /bashcompinit\n[\s\S]*complete -F _imagepull_sweeper imagepull-sweeper/);
  });

  it('fish names every command and option', async () => {
    const r = await cli('completion', 'fish');
    for (const command of ['sweep', 'run', 'policy', 'completion', 'version'])
      assert.match(r.stdout, new RegExp(`-n '__fish_use_subcommand' -a ${command} `));
    assert.match(
      r.stdout,
      /-n '__fish_seen_subcommand_from policy; and not __fish_seen_subcommand_from validate explain schema' -a explain /,
    );
    assert.match(r.stdout, /-n '__fish_seen_subcommand_from sweep' -s A -l all-namespaces /);
    assert.match(r.stdout, /-n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'/);
  });
});
