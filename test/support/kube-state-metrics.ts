// kube-state-metrics (k8s.io/kube-state-metrics/v2 v2.18.0, test/tools/ksm/, built by
// test/tools/build.sh) against the test control plane, for the alerts that read its series
// (the CronJob mode's). Started by the test that needs it, with the admin kubeconfig, only the
// resources and namespaces that test names, and its metrics and telemetry on free loopback ports;
// ready once both its servers answer. stop() ends it; it dies with the test process anyway.
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { REPO } from './cli.ts';
import { toolBinary } from './tools.ts';
import { freePort } from './cluster.ts';
import { waitFor } from './kubelet.ts';

const TOOL_DIR = path.join(REPO, 'test', 'tools', 'ksm');

export interface KubeStateMetrics {
  /** host:port of its /metrics, for a scrape config. */
  target: string;
  url: string;
  version: string;
  logFile: string;
  stop(): Promise<void>;
}

export interface KubeStateMetricsOptions {
  /** Resources to export (`--resources`), e.g. ['cronjobs', 'jobs']. */
  resources: string[];
  /** Namespaces to export (`--namespaces`); others on the shared cluster are not seen. */
  namespaces: string[];
}

/** The module version test/tools/ksm/go.mod pins. */
export function kubeStateMetricsVersion(): string {
  const m = /^\s*k8s\.io\/kube-state-metrics\/v2 (v\S+)/m.exec(fs.readFileSync(path.join(TOOL_DIR, 'go.mod'), 'utf8'));
  if (!m) throw new Error(`${TOOL_DIR}/go.mod does not require k8s.io/kube-state-metrics/v2`);
  return m[1]!;
}

/** The binary, built on first use (minutes cold, instant warm). */
function binary(): Promise<string> {
  return toolBinary('ksm', 'kube-state-metrics');
}

export async function startKubeStateMetrics(kubeconfigPath: string, opts: KubeStateMetricsOptions): Promise<KubeStateMetrics> {
  const bin = await binary();
  const [port, telemetryPort] = [await freePort(), await freePort()];
  const runDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ips-ksm-'));
  const logFile = path.join(runDir, 'kube-state-metrics.log');
  const fd = fs.openSync(logFile, 'a');
  const child: ChildProcess = spawn(
    bin,
    [
      `--kubeconfig=${kubeconfigPath}`,
      `--resources=${opts.resources.join(',')}`,
      `--namespaces=${opts.namespaces.join(',')}`,
      '--host=127.0.0.1',
      `--port=${port}`,
      '--telemetry-host=127.0.0.1',
      `--telemetry-port=${telemetryPort}`,
    ],
    { detached: true, stdio: ['ignore', fd, fd] },
  );
  fs.closeSync(fd);
  let exited: string | undefined;
  child.on('exit', (code, signal) => (exited = `kube-state-metrics exited (code ${code}, signal ${signal}); log ${logFile}`));
  const kill = (): void => {
    if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) process.kill(-child.pid, 'SIGKILL');
  };
  process.on('exit', kill);
  const url = `http://127.0.0.1:${port}`;
  // Ready: the telemetry server's /readyz answers 200 once its own registry gathers, and the
  // metrics server answers. (A resource with no object yet has no HELP line: the test waits for
  // its series in Prometheus.)
  try {
    await waitFor(
      async () => {
        if (exited) throw new Error(exited);
        if ((await fetch(`http://127.0.0.1:${telemetryPort}/readyz`).catch(() => undefined))?.status !== 200) return false;
        return (await fetch(`${url}/metrics`).catch(() => undefined))?.status === 200;
      },
      60_000,
      `kube-state-metrics ready (log ${logFile})`,
    );
  } catch (error) {
    kill();
    throw error;
  }
  return {
    target: `127.0.0.1:${port}`,
    url,
    version: kubeStateMetricsVersion(),
    logFile,
    async stop() {
      const gone = new Promise((r) => (child.exitCode === null && child.signalCode === null ? child.once('exit', r) : r(undefined)));
      if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) process.kill(-child.pid, 'SIGTERM');
      await Promise.race([gone, new Promise((r) => setTimeout(r, 10_000))]);
      kill();
      process.off('exit', kill);
    },
  };
}
