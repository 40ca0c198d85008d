import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let known: string | undefined;

/** The version in the nearest package.json above this module (src/ or dist/src/). */
export function packageVersion(): string {
  if (known !== undefined) return known;
  for (let dir = dirname(fileURLToPath(import.meta.url)); dir !== dirname(dir); dir = dirname(dir)) {
    const path = join(dir, 'package.json');
    if (existsSync(path)) {
      const pkg = JSON.parse(readFileSync(path, 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'imagepull-sweeper' && pkg.version) return (known = pkg.version);
    }
  }
  return (known = 'unknown');
}
