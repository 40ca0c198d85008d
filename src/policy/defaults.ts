// The two built-in policies. `DEFAULT_POLICY` is what `{}` means (the defaults, no rules);
// `FALLBACK_POLICY` is in force when the default policy ConfigMap does not exist.
import { toPolicy } from './schema.ts';
import type { Policy } from './types.ts';

export const BUILTIN_RULE_NAME = 'builtin-system-namespaces';
export const SYSTEM_NAMESPACES = ['kube-system', 'kube-public', 'kube-node-lease'] as const;

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

export const DEFAULT_POLICY: Policy = deepFreeze(toPolicy({}));

export const FALLBACK_POLICY: Policy = deepFreeze({
  ...toPolicy({}),
  rules: [{ name: BUILTIN_RULE_NAME, namespaces: [...SYSTEM_NAMESPACES], action: 'ignore' }],
});
