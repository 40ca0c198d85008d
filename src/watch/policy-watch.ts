// The watch on the policy ConfigMap: every edit, deletion or re-creation calls `onChange`, and
// the ConfigMap's last state answers the policy reads of pre-judgements and timer sweeps (no GET).
// After a 410 the ConfigMap is listed again, and a version other than the last one seen counts as
// a change.
import type { V1ConfigMap } from '@kubernetes/client-node';
import { ApiStatusError } from '../kube/errors.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import type { ReflectorHandler } from './reflector.ts';

export class PolicyConfigMap {
  /** Undefined until the first list; then the ConfigMap, or null when there is none. */
  private current: V1ConfigMap | null | undefined;
  private listing: V1ConfigMap | null = null;

  constructor(
    readonly namespace: string,
    readonly name: string,
    private readonly onChange: () => void,
  ) {}

  handler(): ReflectorHandler<V1ConfigMap> {
    return {
      listStarted: () => (this.listing = null),
      listed: (configMap) => {
        if (configMap.metadata?.name === this.name) this.listing = configMap;
      },
      listEnded: () => this.replace(this.listing),
      event: (type, configMap) => {
        if (configMap.metadata?.name !== this.name) return;
        this.replace(type === 'DELETED' ? null : configMap);
      },
    };
  }

  get synced(): boolean {
    return this.current !== undefined;
  }

  /** The gateway with this ConfigMap's reads answered from the watch (once it has listed). */
  serving(gateway: KubeGateway): KubeGateway {
    return {
      ...gateway,
      readConfigMap: (namespace, name) => {
        if (namespace !== this.namespace || name !== this.name || this.current === undefined) return gateway.readConfigMap(namespace, name);
        if (this.current === null) {
          const message = `configmaps "${name}" not found`;
          const body = JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404, message });
          return Promise.reject(new ApiStatusError(404, `HTTP 404 for GET configmap ${namespace}/${name}: ${message}`, body, {}));
        }
        return Promise.resolve(this.current);
      },
    };
  }

  private replace(next: V1ConfigMap | null): void {
    const before = this.current;
    this.current = next;
    const version = (c: V1ConfigMap | null | undefined) => (c === undefined ? undefined : (c?.metadata?.resourceVersion ?? ''));
    if (before !== undefined && version(before) !== version(next)) this.onChange();
  }
}
