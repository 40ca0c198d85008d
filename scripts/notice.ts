// Writes NOTICE: this project's notice, then each package the bundle carries (dist/bundled-packages.json,
// written by `npm run build`) with its version, licence and the licence text it ships. Run
// `npm run notice` after a dependency changes; test/e2e/image.test.ts fails while NOTICE is stale.
import { readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const RULE = '='.repeat(80);

export interface NoticePackage {
  /** Where it is installed, relative to the repository, e.g. `node_modules/yaml`. */
  path: string;
  name: string;
  version: string;
  license: string;
}

const HEADER = `imagepull-sweeper
Copyright The imagepull-sweeper Authors

Licensed under the Apache License, Version 2.0 (the file LICENSE).

The bundle that the container image and the npm package run (dist/src) includes code from the
packages below, each under its own licence, reproduced as the package ships it. This file is
generated from dist/bundled-packages.json by scripts/notice.ts (npm run notice).
`;

/** Whitespace and the appendix's placeholder brackets aside, is this the Apache-2.0 text of LICENSE? */
function isApacheText(text: string): boolean {
  const normal = (s: string) =>
    s
      .replace(/[{}[\]]/g, '')
      .replace(/\s+/g, ' ')
      .trim();
  return normal(text) === normal(readFileSync(join(ROOT, 'LICENSE'), 'utf8'));
}

/** The package's licence and notice files (LICENSE, LICENCE.md, COPYING, NOTICE, ...), by name. */
function legalFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => /^(licen[cs]e|copying|notice)([.-].*)?$/i.test(f))
    .sort();
}

function section(pkg: NoticePackage): string {
  const dir = join(realpathSync(join(ROOT, 'node_modules')), pkg.path.replace(/^node_modules\//, ''));
  const files = legalFiles(dir);
  if (files.length === 0) throw new Error(`${pkg.name}@${pkg.version} ships no licence file (in ${dir})`);
  const texts = files.map((f) => {
    const text = readFileSync(join(dir, f), 'utf8').replace(/\r\n/g, '\n').trimEnd();
    return isApacheText(text) ? 'The Apache License, Version 2.0: the same text as LICENSE.' : text;
  });
  return `${pkg.name} ${pkg.version} (${pkg.license})\n${'-'.repeat(80)}\n\n${texts.join('\n\n')}`;
}

/** NOTICE's whole text for these packages. */
export function renderNotice(packages: readonly NoticePackage[]): string {
  const sorted = [...packages].sort((a, b) => a.name.localeCompare(b.name, 'en') || a.version.localeCompare(b.version, 'en'));
  return `${[HEADER.trimEnd(), ...sorted.map(section)].join(`\n\n${RULE}\n\n`)}\n`;
}

if (process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const packages = JSON.parse(readFileSync(join(ROOT, 'dist', 'bundled-packages.json'), 'utf8')) as NoticePackage[];
  writeFileSync(join(ROOT, 'NOTICE'), renderNotice(packages));
}
