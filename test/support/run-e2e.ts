// Runs the e2e files (or a command) against one shared local control plane and, where the
// machine allows (Linux, root), one real node per container runtime of the run joined to it:
//   tsx test/support/run-e2e.ts --suite e2e      every file, in the lanes of test/e2e/suites.ts
//   tsx test/support/run-e2e.ts --suite compat   the compatibility subset of $IMAGEPULL_SWEEPER_K8S_VERSION
//   tsx test/support/run-e2e.ts <command> [args...]   e.g. node --import tsx --test test/e2e/x.test.ts
// The runtimes: $IMAGEPULL_SWEEPER_TEST_RUNTIMES (e.g. `containerd,containerd2`), by default every
// runtime this machine can run (test/support/runtimes.ts).
// Builds the binaries if needed, installs the node's packages if missing, starts the cluster and
// the nodes, exports $IMAGEPULL_SWEEPER_TEST_KUBECONFIG and $IMAGEPULL_SWEEPER_TEST_NODES (or
// $IMAGEPULL_SWEEPER_TEST_NODE_SKIP with the reason the node tests are skipped), runs the suite's
// lanes (test/support/lanes.ts) or the command with inherited stdio, stops the nodes and the
// cluster (keeping the logs if it failed) and exits with its exit code. Meanwhile it builds, on
// idle CPU, the test tools in $IMAGEPULL_SWEEPER_PREBUILD_TOOLS, then the control planes of the
// minors in $IMAGEPULL_SWEEPER_PREBUILD_VERSIONS (test/support/prebuild.ts).
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import * as path from 'node:path';
import { constants } from 'node:os';
import { fileURLToPath } from 'node:url';
import { compatPhases, E2E, placementProblems, type Phase } from '../e2e/suites.ts';
import { ensureBuilt } from './cli.ts';
import { closingReport, failed, runPhases } from './lanes.ts';
import { K8S_VERSION_ENV, startCluster, TEST_KUBECONFIG_ENV, TEST_STARTUP_MS_ENV } from './cluster.ts';
import { ensureNodePackages, nodeSupport, startNode, TEST_NODE_ENV, TEST_NODE_SKIP_ENV, TEST_NODES_ENV } from './node.ts';
import { requestedRuntimes, runtimeSupport, type NodeRuntime } from './runtimes.ts';
import { PREBUILD_ENV, PREBUILD_TOOLS_ENV, prebuildMinors, prebuildTools, startPrebuild } from './prebuild.ts';

const E2E_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../e2e');
const [command, ...args] = process.argv.slice(2);
if (!command || (command === '--suite' && !['e2e', 'compat'].includes(args[0] ?? ''))) {
  process.stderr.write('usage: run-e2e.ts --suite e2e|compat\n       run-e2e.ts <command> [args...]\n');
  process.exit(2);
}
let phases: Phase[] | undefined;
if (command === '--suite') {
  if (args[0] === 'e2e') {
    const problems = placementProblems(readdirSync(E2E_DIR).filter((f) => f.endsWith('.test.ts')));
    if (problems.length > 0) {
      process.stderr.write(`test/e2e/suites.ts: ${problems.join('; ')}\n`);
      process.exit(2);
    }
    phases = [...E2E];
  } else {
    try {
      phases = compatPhases(process.env[K8S_VERSION_ENV] ?? '1.37');
    } catch (e) {
      process.stderr.write(`${(e as Error).message}\n`);
      process.exit(2);
    }
  }
  // Built once here, not by the first file of each lane at the same time.
  ensureBuilt();
}

const t0 = Date.now();
const cluster = await startCluster();
process.stderr.write(`[cluster] control plane startup-to-ready: ${cluster.startupMs} ms; kubeconfig ${cluster.kubeconfigPath}\n`);

const env: NodeJS.ProcessEnv = {
  ...process.env,
  [TEST_KUBECONFIG_ENV]: cluster.kubeconfigPath,
  [TEST_STARTUP_MS_ENV]: String(cluster.startupMs),
};
const skip = process.env[TEST_NODE_SKIP_ENV] || nodeSupport();
const nodes: Awaited<ReturnType<typeof startNode>>[] = [];
delete env[TEST_NODE_ENV];
if (skip) {
  env[TEST_NODE_SKIP_ENV] = skip;
  process.stderr.write(`[node] no real node: ${skip}; the node tests will be reported as skipped\n`);
} else {
  try {
    const runtimes = requestedRuntimes();
    // An explicitly requested runtime this machine cannot run is an error, not a silent skip.
    const cannot = runtimes.map((r) => [r, runtimeSupport(r)]).filter(([, why]) => why);
    if (cannot.length > 0) throw new Error(cannot.map(([r, why]) => `runtime ${r}: ${why}`).join('; '));
    if (runtimes.length === 0) throw new Error('no container runtime can run on this machine');
    await ensureNodePackages();
    const shared: Partial<Record<NodeRuntime, string>> = {};
    for (const runtime of runtimes) {
      const tNode = Date.now();
      const node = await startNode({ kubeconfigPath: cluster.kubeconfigPath, runtime });
      nodes.push(node);
      shared[runtime] = path.join(node.runDir, 'node.json');
      process.stderr.write(
        `[node] ${node.name} (${node.runtimeVersion}) set up in ${Date.now() - tNode} ms (Ready ${node.startupMs} ms after first spawn)\n`,
      );
    }
    env[TEST_NODES_ENV] = JSON.stringify(shared);
  } catch (e) {
    for (const n of nodes) await n.stop({ keepLogs: true });
    await cluster.stop({ keepLogs: true });
    process.stderr.write(`[node] ${(e as Error).message}\n`);
    process.exit(1);
  }
}
process.stderr.write(`[e2e] environment ready in ${Date.now() - t0} ms\n`);
// The tools this run's tests build on first use, then the control planes of the runs that follow
// (npm test's compatibility runs), on idle CPU meanwhile.
const prebuild = startPrebuild(
  prebuildTools(process.env[PREBUILD_TOOLS_ENV]),
  prebuildMinors(process.env[PREBUILD_ENV], process.env[K8S_VERSION_ENV] ?? '1.37'),
  (line) => process.stderr.write(`[prebuild] ${line}\n`),
);

const { code, report } = phases ? await runSuite(phases) : { code: await runCommand(), report: '' };

async function runSuite(suite: Phase[]): Promise<{ code: number; report: string }> {
  const tRun = Date.now();
  const runs = await runPhases(suite, {
    dir: E2E_DIR,
    env,
    out: (text) => process.stdout.write(text),
    log: (line) => process.stderr.write(`[lanes] ${line}\n`),
  });
  return { code: runs.some(failed) ? 1 : 0, report: closingReport(runs, Date.now() - tRun) };
}

function runCommand(): Promise<number> {
  const child = spawn(command!, args, { stdio: 'inherit', env });
  return new Promise<number>((resolve) => {
    child.on('error', (e) => {
      process.stderr.write(`[cluster] could not run ${command}: ${e.message}\n`);
      resolve(127);
    });
    child.on('exit', (c, signal) => resolve(c ?? 128 + (signal ? constants.signals[signal] : 0)));
  });
}

await prebuild?.stop();
const keepLogs = code !== 0 || process.env.IMAGEPULL_SWEEPER_KEEP_CLUSTER_LOGS === '1';
for (const node of nodes) {
  await node.stop({ keepLogs });
  if (keepLogs) process.stderr.write(`[node] ${node.runtime} node logs kept in ${node.logDir}\n`);
}
await cluster.stop({ keepLogs });
if (keepLogs) process.stderr.write(`[cluster] control-plane logs kept in ${cluster.logDir}\n`);
process.stderr.write(`[cluster] control plane startup-to-ready was ${cluster.startupMs} ms\n`);
// Last, so the run ends with the test runner's summary lines.
process.stdout.write(report);
process.exit(code);
