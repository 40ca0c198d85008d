// kubectl's `--dry-run[=client|server]` for `sweep` and `run` (docs/contract.md "kubectl conventions").
import { Option } from 'commander';
import type { DryRunMode } from '../sweep.ts';

export const DRY_RUN_MODES: readonly DryRunMode[] = ['client', 'server'];

/**
 * Without a value it is `client`. Commander's optional value also takes the next word when it is
 * not an option (`--dry-run server`), so `--dry-run -n x` and `--dry-run --namespace x` stay client.
 */
export function dryRunOption(): Option {
  return new Option(
    '--dry-run [mode]',
    'decide everything, change nothing: client sends no write; server sends each with dryRun=All, judged by RBAC and admission',
  )
    .choices(DRY_RUN_MODES)
    .preset('client');
}

/** The sweep's options for the flag's value (undefined: not given). */
export function dryRunOptions(flag: DryRunMode | undefined): { dryRun: boolean; dryRunMode?: DryRunMode } {
  return flag === undefined ? { dryRun: false } : { dryRun: true, dryRunMode: flag };
}
