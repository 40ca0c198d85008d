// Runs a command (the e2e test runner) against one shared local control plane:
//   node --import tsx test/support/run-e2e.ts <command> [args...]
// Builds the binaries if needed, starts the cluster, exports its admin kubeconfig as
// $IMAGEPULL_SWEEPER_TEST_KUBECONFIG, runs the command with inherited stdio, stops the cluster
// (keeping the logs if the command failed) and exits with the command's exit code.
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { startCluster, TEST_KUBECONFIG_ENV, TEST_STARTUP_MS_ENV } from './cluster.ts';

const [command, ...args] = process.argv.slice(2);
if (!command) {
  process.stderr.write('usage: run-e2e.ts <command> [args...]\n');
  process.exit(2);
}

const cluster = await startCluster();
process.stderr.write(
  `[cluster] control plane startup-to-ready: ${cluster.startupMs} ms; kubeconfig ${cluster.kubeconfigPath}\n`,
);

const child = spawn(command, args, {
  stdio: 'inherit',
  env: {
    ...process.env,
    [TEST_KUBECONFIG_ENV]: cluster.kubeconfigPath,
    [TEST_STARTUP_MS_ENV]: String(cluster.startupMs),
  },
});
const code = await new Promise<number>((resolve) => {
  child.on('error', (e) => {
    process.stderr.write(`[cluster] could not run ${command}: ${e.message}\n`);
    resolve(127);
  });
  child.on('exit', (c, signal) => resolve(c ?? 128 + (signal ? constants.signals[signal] : 0)));
});

const keepLogs = code !== 0 || process.env.IMAGEPULL_SWEEPER_KEEP_CLUSTER_LOGS === '1';
await cluster.stop({ keepLogs });
if (keepLogs) process.stderr.write(`[cluster] control-plane logs kept in ${cluster.logDir}\n`);
process.stderr.write(`[cluster] control plane startup-to-ready was ${cluster.startupMs} ms\n`);
process.exit(code);
