// Local control plane for hands-on work:
//   npm run cluster:up      start it in the background (detached) and print how to use it
//   npm run cluster:status  say whether it runs
//   npm run cluster:down    stop it and remove its temp dir
// State (pids, dirs) is kept in .cache/cluster.json in the clone (git-ignored).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startCluster, stopProcesses, removeRunDir, type ClusterState } from '../test/support/cluster.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const stateFile = path.join(root, '.cache', 'cluster.json');

function readState(): ClusterState | undefined {
  if (!fs.existsSync(stateFile)) return undefined;
  return JSON.parse(fs.readFileSync(stateFile, 'utf8')) as ClusterState;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function describe(st: ClusterState): string {
  const procs = Object.entries(st.pids)
    .map(([c, pid]) => `${c}=${pid}${alive(pid) ? '' : ' (dead)'}`)
    .join(' ');
  return [
    `Kubernetes ${st.version} control plane (etcd, kube-apiserver, kube-controller-manager; no scheduler, no kubelet)`,
    `  server:     ${st.server}`,
    `  kubeconfig: ${st.kubeconfigPath}`,
    `  logs:       ${st.logDir}`,
    `  processes:  ${procs}`,
    '',
    'Use it:',
    `  export KUBECONFIG=${st.kubeconfigPath}`,
    `  npx tsx src/cli/main.ts sweep --dry-run --kubeconfig ${st.kubeconfigPath}`,
    `  IMAGEPULL_SWEEPER_TEST_KUBECONFIG=${st.kubeconfigPath} node --import tsx --test test/e2e/*.test.ts`,
    'Stop it: npm run cluster:down',
  ].join('\n');
}

async function down(st: ClusterState): Promise<void> {
  await stopProcesses([st.pids['kube-controller-manager'], st.pids['kube-apiserver'], st.pids.etcd]);
  if (fs.existsSync(st.runDir)) removeRunDir(st.runDir, false);
  fs.rmSync(stateFile, { force: true });
}

const cmd = process.argv[2];
const st = readState();
switch (cmd) {
  case 'up': {
    if (st && Object.values(st.pids).every(alive)) {
      console.log(`already running\n${describe(st)}`);
      break;
    }
    if (st) await down(st); // half-dead leftovers
    const cluster = await startCluster({ detached: true });
    fs.mkdirSync(path.dirname(stateFile), { recursive: true });
    fs.writeFileSync(stateFile, JSON.stringify(cluster.state, null, 2) + '\n');
    console.log(`started in ${cluster.startupMs} ms\n${describe(cluster.state)}`);
    break;
  }
  case 'down':
    if (!st) {
      console.log('no cluster recorded in .cache/cluster.json');
      break;
    }
    await down(st);
    console.log(`stopped; removed ${st.runDir}`);
    break;
  case 'status':
    if (!st) {
      console.log('not running');
      process.exitCode = 1;
      break;
    }
    console.log(describe(st));
    if (!Object.values(st.pids).every(alive)) process.exitCode = 1;
    break;
  default:
    console.error('usage: cluster.ts up|down|status');
    process.exitCode = 2;
}
