// Local control plane (and, on Linux as root, a real node joined to it) for hands-on work:
//   npm run cluster:up      start them in the background (detached) and print how to use them
//   npm run cluster:status  say whether they run
//   npm run cluster:down    stop them and remove their temp dirs
// State (pids, dirs) is kept in .cache/cluster.json and .cache/node.json in the clone (git-ignored).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect, startCluster, stopProcesses, removeRunDir, type ClusterState } from '../test/support/cluster.ts';
import { cleanupNode, drainNode, ensureNodePackages, nodeSupport, startNode, type NodeInfo } from '../test/support/node.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const stateFile = path.join(root, '.cache', 'cluster.json');
const nodeFile = path.join(root, '.cache', 'node.json');

function readNode(): NodeInfo | undefined {
  if (!fs.existsSync(nodeFile)) return undefined;
  return JSON.parse(fs.readFileSync(nodeFile, 'utf8')) as NodeInfo;
}

function describeNode(n: NodeInfo): string {
  const procs = Object.entries(n.pids)
    .map(([c, pid]) => `${c}=${pid}${alive(pid) ? '' : ' (dead)'}`)
    .join(' ');
  return [
    `Real node ${n.name} (kubelet, containerd; pods need spec.nodeName: ${n.name})`,
    `  registries: ${n.registry} (open), ${n.authRegistry} (user ${n.authUser}, password ${n.authPassword})`,
    `  pause image: ${n.pauseImage}`,
    `  containerd: ctr --address ${n.criSocket} -n k8s.io images ls`,
    `  logs:       ${n.logDir}`,
    `  processes:  ${procs}`,
    `Node tests on it: add IMAGEPULL_SWEEPER_TEST_NODE=${path.join(n.runDir, 'node.json')}`,
  ].join('\n');
}

async function nodeDown(n: NodeInfo, st: ClusterState | undefined): Promise<void> {
  if (st && alive(st.pids['kube-apiserver'])) await drainNode(connect(st.kubeconfigPath).kubeConfig, n, () => {});
  await cleanupNode(n.runDir);
  fs.rmSync(nodeFile, { force: true });
}

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
    `Kubernetes ${st.version} control plane (etcd, kube-apiserver, kube-controller-manager; no scheduler)`,
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
  const n = readNode();
  if (n) await nodeDown(n, st);
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
    const why = nodeSupport();
    if (why) {
      console.log(`\nNo real node: ${why}.`);
      break;
    }
    await ensureNodePackages();
    const node = await startNode({ kubeconfigPath: cluster.kubeconfigPath, detached: true });
    const { stop: _stop, pushImage: _push, ...info } = node;
    fs.writeFileSync(nodeFile, JSON.stringify(info, null, 2) + '\n', { mode: 0o600 });
    console.log(`\nnode Ready ${node.startupMs} ms after the first spawn\n${describeNode(info)}`);
    break;
  }
  case 'down':
    if (!st) {
      const n = readNode();
      if (n) await nodeDown(n, undefined);
      console.log(`no cluster recorded in .cache/cluster.json${n ? `; removed node ${n.name}` : ''}`);
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
    {
      const n = readNode();
      if (n) {
        console.log(`\n${describeNode(n)}`);
        if (!Object.values(n.pids).every(alive)) process.exitCode = 1;
      }
    }
    break;
  default:
    console.error('usage: cluster.ts up|down|status');
    process.exitCode = 2;
}
