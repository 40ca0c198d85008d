// Helm for the chart's tests: built from its pinned Go module (test/tools/helm/, cached by
// test/tools/build.sh) the first time a test needs it.
import * as fs from 'node:fs';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { KubernetesObject } from '@kubernetes/client-node';
import { parse as parseYaml, parseAllDocuments, stringify } from 'yaml';
import { exec, type Exec, REPO } from './cli.ts';
import { renderKustomization } from './kustomize.ts';
import { toolBinary } from './tools.ts';

export const CHART = path.join(REPO, 'charts', 'imagepull-sweeper');

let built: Promise<string> | undefined;

/** The helm binary (built on first use: minutes cold, instant warm). */
export function helmBinary(): Promise<string> {
  return (built ??= toolBinary('helm', 'helm'));
}

/** Runs helm with its state (repositories, cache) in a scratch HOME. */
export async function helm(args: string[], env: Record<string, string> = {}): Promise<Exec> {
  const home = mkdtempSync(path.join(tmpdir(), 'ips-helm-home-'));
  try {
    return await exec(await helmBinary(), args, {
      env: {
        PATH: process.env.PATH ?? '',
        HOME: home,
        HELM_CACHE_HOME: path.join(home, 'cache'),
        HELM_CONFIG_HOME: path.join(home, 'config'),
        HELM_DATA_HOME: path.join(home, 'data'),
        ...env,
      },
      timeoutMs: 180_000,
    });
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

/** `helm template` of the chart into the namespace, as objects (throws on a failed render). */
export async function helmTemplate(namespace: string, set: string[] = []): Promise<KubernetesObject[]> {
  // --skip-tests: the `helm test` hook is no object of the release.
  const r = await helm([
    'template',
    'imagepull-sweeper',
    CHART,
    '--namespace',
    namespace,
    '--skip-tests',
    ...set.flatMap((s) => ['--set', s]),
  ]);
  if (r.code !== 0) throw new Error(`helm template failed (${r.code}): ${r.stderr}`);
  return parseAllDocuments(r.stdout)
    .map((d) => d.toJS() as KubernetesObject | null)
    .filter((o): o is KubernetesObject => o !== null);
}

/**
 * The chart rendered for the real test node: `overlay`'s kustomization (written for manifests/)
 * applied to the chart's render instead; the image is set with chart values, not `images:`.
 */
export async function renderChartWithOverlay(overlay: string, vars: Record<string, string>, set: string[]): Promise<KubernetesObject[]> {
  const objects = await helmTemplate('imagepull-sweeper', ['createNamespace=true', ...set]);
  const dir = mkdtempSync(path.join(tmpdir(), 'ips-helm-overlay-'));
  writeFileSync(path.join(dir, 'chart.yaml'), objects.map((o) => stringify(o)).join('---\n'));
  const kustomization = parseYaml(fs.readFileSync(path.join(overlay, 'kustomization.yaml'), 'utf8')) as Record<string, unknown>;
  kustomization.resources = ['chart.yaml'];
  delete kustomization.images;
  writeFileSync(path.join(dir, 'kustomization.yaml'), stringify(kustomization));
  return renderKustomization(dir, vars);
}
