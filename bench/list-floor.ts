// The floor the sweep is compared with: the full-object paged LIST of Pending pods with
// client-node (500 a page, its typed models), as a process of its own. Run with plain node:
//   node bench/list-floor.ts KUBECONFIG
// Prints one JSON line: pods, pages, listMs (the LIST alone, after imports and config).
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';

const kc = new KubeConfig();
kc.loadFromFile(process.argv[2]!);
const core = kc.makeApiClient(CoreV1Api);
const started = performance.now();
let pods = 0;
let pages = 0;
let token: string | undefined;
do {
  const page = await core.listPodForAllNamespaces({ fieldSelector: 'status.phase=Pending', limit: 500, _continue: token });
  pods += page.items.length;
  pages += 1;
  token = page.metadata?._continue || undefined;
} while (token);
console.log(JSON.stringify({ pods, pages, listMs: Math.round(performance.now() - started) }));
