// The Dockerfile, read and its runtime stage repeated without a container engine: shared by
// test/e2e/image.test.ts (runs the ENTRYPOINT from the copy) and test/support/sweeper-image.ts
// (packs the copy as an OCI image for the real node). Steps come from the Dockerfile itself, so
// neither can drift from the users' build.
import { cpSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { REPO } from './cli.ts';

export interface Instruction {
  op: string;
  args: string;
  line: number;
}

export interface Stage {
  from: string;
  name: string | undefined;
  instructions: Instruction[];
}

/** Dockerfile → stages of instructions (comments dropped, `\` continuations joined). */
export function parseDockerfile(text: string): Stage[] {
  const stages: Stage[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i += 1) {
    const start = i + 1;
    let line = lines[i]!.trim();
    if (!line || line.startsWith('#')) continue;
    while (line.endsWith('\\') && i + 1 < lines.length) {
      i += 1;
      const next = lines[i]!.trim();
      line = `${line.slice(0, -1).trimEnd()} ${next.startsWith('#') ? '' : next}`.trim();
    }
    const [, op = '', args = ''] = /^(\S+)\s*(.*)$/.exec(line) ?? [];
    const instruction = { op: op.toUpperCase(), args: args.trim(), line: start };
    if (instruction.op === 'FROM') {
      const [image = '', as, name] = instruction.args.split(/\s+/);
      stages.push({ from: image, name: as?.toUpperCase() === 'AS' ? name : undefined, instructions: [] });
    } else {
      if (stages.length === 0) throw new Error(`Dockerfile line ${start}: ${op} before FROM`);
      stages.at(-1)!.instructions.push(instruction);
    }
  }
  return stages;
}

/** `COPY [--from=x] src... dest` → its parts. */
export function copyParts(args: string): { from: string | undefined; sources: string[]; dest: string } {
  const words = args.split(/\s+/);
  let from: string | undefined;
  while (words[0]?.startsWith('--')) {
    const flag = words.shift()!;
    if (flag.startsWith('--from=')) from = flag.slice('--from='.length);
  }
  const dest = words.pop();
  if (!dest || words.length === 0) throw new Error(`COPY ${args}: needs sources and a destination`);
  return { from, sources: words, dest };
}

/** The exec form (JSON array) of ENTRYPOINT/CMD. */
export function execForm(stage: Stage, op: string): string[] {
  const found = stage.instructions.filter((i) => i.op === op);
  if (found.length !== 1) throw new Error(`Dockerfile: expected one ${op} in the runtime stage, found ${found.length}`);
  const value = JSON.parse(found[0]!.args) as unknown;
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) {
    throw new Error(`Dockerfile line ${found[0]!.line}: ${op} must be in exec (JSON array) form`);
  }
  return value as string[];
}

/** One `npm ...` command out of a RUN line (`a && npm ci ... && b`). */
export function npmCommand(run: string, sub: string): string[] | undefined {
  const command = run
    .split(/&&|;/)
    .map((c) => c.trim())
    .find((c) => c.startsWith(`npm ${sub}`));
  return command?.split(/\s+/).slice(1);
}

export const DOCKERFILE = join(REPO, 'Dockerfile');

export function readDockerfile(): { text: string; stages: Stage[]; runtime: Stage } {
  const text = readFileSync(DOCKERFILE, 'utf8');
  const stages = parseDockerfile(text);
  const runtime = stages.at(-1);
  if (!runtime) throw new Error('Dockerfile: no FROM');
  return { text, stages, runtime };
}

/** What the runtime stage makes of an image, besides its files. */
export interface RuntimeConfig {
  workdir: string;
  env: Record<string, string>;
  entrypoint: string[];
  cmd: string[];
  /** USER, e.g. `65532:65532`. */
  user: string;
}

export function runtimeConfig(runtime: Stage = readDockerfile().runtime): RuntimeConfig {
  const of = (op: string): Instruction[] => runtime.instructions.filter((i) => i.op === op);
  const wd = of('WORKDIR');
  if (wd.length !== 1) throw new Error(`Dockerfile: expected one WORKDIR in the runtime stage, found ${wd.length}`);
  const users = of('USER');
  if (users.length !== 1) throw new Error(`Dockerfile: expected one USER in the runtime stage, found ${users.length}`);
  const env: Record<string, string> = {};
  for (const i of of('ENV')) {
    const [, name = '', value = ''] = /^(\w+)=(.*)$/.exec(i.args) ?? [];
    if (!name) throw new Error(`Dockerfile line ${i.line}: ENV ${i.args}: use the NAME=value form`);
    env[name] = value;
  }
  return { workdir: wd[0]!.args, env, entrypoint: execForm(runtime, 'ENTRYPOINT'), cmd: execForm(runtime, 'CMD'), user: users[0]!.args };
}

/** A path inside the image (absolute, or relative to WORKDIR) → the same path under `appDir`. */
export function toLocal(workdir: string, appDir: string, imagePath: string): string {
  const absolute = posix.resolve(workdir, imagePath);
  if (absolute === workdir) return appDir;
  if (!absolute.startsWith(`${workdir}/`)) return imagePath;
  return join(appDir, posix.relative(workdir, absolute));
}

/**
 * Repeats the runtime stage's COPY steps into `appDir` (the image's WORKDIR), in order, as
 * `docker build` runs them; the build stage's output is the local build (dist/src). The stage
 * installs nothing (the bundle carries its dependencies): an `npm` step there is an error. Other RUN
 * steps (user creation) have nothing to repeat outside an image.
 */
export function replayRuntimeStage(appDir: string): RuntimeConfig {
  const { stages, runtime } = readDockerfile();
  const config = runtimeConfig(runtime);
  mkdirSync(appDir, { recursive: true });
  for (const i of runtime.instructions) {
    if (i.op === 'RUN' && /(^|[\s;&|])npm\s/.test(i.args)) {
      throw new Error(`Dockerfile line ${i.line}: the runtime stage installs nothing; the bundle (dist/src) carries its dependencies`);
    }
    if (i.op !== 'COPY') continue;
    const { from, sources, dest } = copyParts(i.args);
    const target = toLocal(config.workdir, appDir, dest.endsWith('/') || sources.length > 1 ? `${dest.replace(/\/?$/, '/')}` : dest);
    for (const source of sources) {
      let local: string;
      if (from) {
        const buildStage = stages.find((s) => s.name === from);
        if (!buildStage) throw new Error(`Dockerfile line ${i.line}: COPY --from=${from}: no such stage`);
        const buildWorkdir = buildStage.instructions.find((w) => w.op === 'WORKDIR')?.args ?? '/';
        const relative = posix.relative(buildWorkdir, posix.resolve(buildWorkdir, source));
        // Only the bundle comes from the build stage; here it is the local build.
        if (relative !== 'dist/src') throw new Error(`Dockerfile line ${i.line}: COPY --from=${from} ${source}: only dist/src is known`);
        local = join(REPO, relative);
      } else {
        local = join(REPO, source);
      }
      const into = sources.length > 1 || dest.endsWith('/') ? join(target, posix.basename(source)) : target;
      mkdirSync(dirname(into), { recursive: true });
      cpSync(local, into, { recursive: true });
    }
  }
  return config;
}
