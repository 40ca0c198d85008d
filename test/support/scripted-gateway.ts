// A KubeGateway for unit tests: each method answers from the list a test gives it, in order (an
// Error rejects), and every call is recorded. What the real API server answers is proven by the
// e2e tests against the real control plane; this fake only replays answers a test chose.
import type { V1Job, V1Pod } from '@kubernetes/client-node';
import { ApiStatusError } from '../../src/kube/errors.ts';
import type { KubeGateway } from '../../src/kube/gateway.ts';
import type { ServerDate } from '../../src/kube/server-clock.ts';

export type GatewayMethod = Exclude<keyof KubeGateway, 'lastServerDate' | 'serverDryRun'>;

export interface Call {
  /** `serverDryRun`: the sweep asked for the server-dry-run variant, which is this same gateway. */
  method: GatewayMethod | 'serverDryRun';
  args: unknown[];
}

/** Per method, its answers in order. A function answer is called with the call's arguments. */
export type Script = Partial<Record<GatewayMethod, unknown[]>>;

export interface ScriptedGateway {
  gateway: KubeGateway;
  calls: Call[];
  /** The methods called, in order. */
  methods: () => Call['method'][];
  /** How many times `method` was called. */
  count: (method: GatewayMethod) => number;
  /** Answers listed but never asked for (a test that expected more calls). */
  unused: () => Script;
}

const EMPTY_PAGE = { items: [], continueToken: undefined };

/**
 * Without a listed answer a write resolves, a list is an empty page, and a read is a 404 (the
 * object does not exist): a test lists every object it wants to exist. With `repeatLast`, a
 * method whose answers ran out gives its last one again (a server that stays down).
 */
export function scriptedGateway(script: Script = {}, options: { serverDate?: ServerDate; repeatLast?: boolean } = {}): ScriptedGateway {
  const queues = new Map(Object.entries(script).map(([method, answers]) => [method, [...(answers ?? [])]]));
  const calls: Call[] = [];
  const answer = async (method: GatewayMethod, args: unknown[]): Promise<unknown> => {
    calls.push({ method, args });
    const queue = queues.get(method);
    if (queue && queue.length > 0) {
      const next = options.repeatLast && queue.length === 1 ? queue[0] : queue.shift();
      const value = typeof next === 'function' ? await (next as (...a: unknown[]) => unknown)(...args) : next;
      if (value instanceof Error) throw value;
      return value;
    }
    if (method.startsWith('list')) return EMPTY_PAGE;
    if (method.startsWith('read')) throw apiError(404, 'NotFound', `${method} ${args.slice(0, 2).join('/')}: not found`);
    return method === 'patchPodStatus' ? {} : undefined;
  };
  const serverDryRun = (): KubeGateway => (calls.push({ method: 'serverDryRun', args: [] }), gateway);
  const gateway: KubeGateway = new Proxy({} as KubeGateway, {
    get: (_, method: string) => {
      if (method === 'lastServerDate') return () => options.serverDate;
      if (method === 'serverDryRun') return serverDryRun;
      return (...args: unknown[]) => answer(method as GatewayMethod, args);
    },
  });
  return {
    gateway,
    calls,
    methods: () => calls.map((c) => c.method),
    count: (method) => calls.filter((c) => c.method === method).length,
    unused: () => Object.fromEntries([...queues].filter(([, q]) => q.length > 0)) as Script,
  };
}

/** A Kubernetes Status answer, as the gateway throws it. */
export function apiError(code: number, reason: string, message: string): ApiStatusError {
  return new ApiStatusError(
    code,
    `HTTP ${code}`,
    JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason, message }),
    {},
  );
}

/** A request whose answer never came back (the connection dropped). */
export function lostAnswer(): Error {
  return Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
}

export type { V1Job, V1Pod };
