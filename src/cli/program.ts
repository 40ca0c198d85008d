import { Argument, Command, CommanderError, Option } from 'commander';
import { explainFailure } from '../kube/errors.ts';
import { DEFAULT_KUBE_API_BURST, DEFAULT_KUBE_API_QPS } from '../kube/rate-limit.ts';
import { DEFAULT_REQUEST_TIMEOUT_MS } from '../kube/timeout.ts';
import { parsePolicyDocument } from '../policy/configmap.ts';
import { policyJsonSchema } from '../policy/json-schema.ts';
import { loadPolicy, problemSource, readPolicyFile } from '../policy/load.ts';
import { formatProblem } from '../policy/problems.ts';
import type { OutputFormat } from '../report/logger.ts';
import {
  type CliIo,
  type ConnectionFlags,
  type PolicyFlags,
  type SweepFlags,
  clientSettings,
  outputFormat,
  prepareSweep,
  requestTimeoutMs,
  retryLine,
  shownDuration,
  tryGateway,
} from './connect.ts';
import { SHELLS, type Shell, completionScript } from './completion.ts';
import { UsageError, asUsageError } from './errors.ts';
import { EXIT, exitStatusOf } from './exit.ts';
import { explainPolicy } from './explain.ts';
import { invokedName, kueueConfigLocation, policyLocation } from './kube.ts';
import { dryRunOption } from './dry-run.ts';
import { type LeaderElectFlags, runAsLeader, withLeaderElectOptions } from './leader-elect.ts';
import { packageVersion } from '../version.ts';

/** Options shared by `sweep`, `run` and `policy explain`, declared once. */
function withPolicyOptions(cmd: Command): Command {
  return cmd
    .option('--policy-configmap <ns/name>', "policy ConfigMap (default: imagepull-sweeper-policy in the sweeper's namespace)")
    .option('--policy-file <file>', 'read the policy from a file instead of a ConfigMap')
    .option('--kueue-config <ns/name>', "Kueue's configuration ConfigMap, for its timeout (default: kueue-system/kueue-manager-config)");
}

function withOutputAndConnectionOptions(cmd: Command): Command {
  return cmd
    .addOption(new Option('-o, --output <format>', 'text or json (default: text on a terminal, else json)').choices(['text', 'json']))
    .option('--kubeconfig <file>', 'kubeconfig file (default: KUBECONFIG, ~/.kube/config, or in-cluster)')
    .option('--context <name>', 'kubeconfig context to use')
    .option(
      '--request-timeout <duration>',
      'give up on one API request after this long (Go duration)',
      shownDuration(DEFAULT_REQUEST_TIMEOUT_MS),
    )
    .option('--kube-api-qps <qps>', 'requests per second to the API server, at most (0: no limit)', String(DEFAULT_KUBE_API_QPS))
    .option('--kube-api-burst <n>', 'requests at once above --kube-api-qps', String(DEFAULT_KUBE_API_BURST));
}

const SWEEP_EXAMPLES = `
Examples:
  $ imagepull-sweeper sweep --dry-run
  $ imagepull-sweeper sweep --namespace ci-runners --namespace tenant-a --output json
  $ imagepull-sweeper sweep --policy-file ./policy.yaml --context staging`;

const RUN_EXAMPLES = `
Examples:
  $ imagepull-sweeper run --schedule "*/2 * * * *"
  $ imagepull-sweeper run --schedule "0 */5 * * * *" --timezone Europe/Berlin --listen :9090`;

/** Builds the command tree; `setExitCode` receives the status (docs/contract.md: 0, 1, 2, 3). */
export function buildProgram(io: CliIo, setExitCode: (code: number) => void): Command {
  const program = new Command(invokedName())
    .description('Fails Kubernetes Jobs whose pods are stuck pulling their image, by namespace policy, with an audit trail.')
    .version(packageVersion())
    .showHelpAfterError('(run with --help for usage)')
    .configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s) })
    .exitOverride();

  const withSweepOptions = (cmd: Command): Command =>
    withOutputAndConnectionOptions(
      withPolicyOptions(cmd.addOption(dryRunOption()))
        .option('-n, --namespace <ns>', 'sweep only this namespace (repeatable; default: all)', collect)
        .addOption(new Option('-A, --all-namespaces', 'sweep every namespace (the default)').conflicts('namespace')),
    );

  withSweepOptions(program.command('sweep').description('run one sweep and exit'))
    .addHelpText('after', SWEEP_EXAMPLES)
    .action(async (flags: SweepFlags) => {
      const { deps, options, sweep } = await prepareSweep(flags, io);
      const stop = new AbortController();
      io.onStopSignal(() => {
        if (!stop.signal.aborted) deps.logger.warn('stop requested: finishing the writes in flight, starting no new ones');
        stop.abort();
      });
      setExitCode(exitStatusOf((await sweep(deps, { ...options, signal: stop.signal })).status));
    });

  withLeaderElectOptions(withSweepOptions(program.command('run').description('sweep on a cron schedule until SIGTERM/SIGINT')))
    .requiredOption('--schedule <cron>', 'cron expression: 5 fields, or 6 with seconds first')
    .option('--timezone <tz>', 'IANA time zone for the schedule', 'UTC')
    .option('--listen <addr>', 'serve /healthz and /metrics on HOST:PORT (e.g. :9090)')
    .option(
      '--watch',
      'also act on each Job the moment its grace runs out (a watch on the pods and the policy); the schedule stays as a backstop',
    )
    .addHelpText('after', RUN_EXAMPLES)
    .action(async (flags: SweepFlags & LeaderElectFlags & { schedule: string; timezone: string; listen?: string; watch?: boolean }) => {
      // Loaded here: `sweep` and `policy` never need the scheduler or prom-client.
      const { abortableSleep, parseSchedule, runOnSchedule } = await import('../run/scheduler.ts');
      const { SweepMetrics, parseListenAddress, serveMetrics } = await import('../run/metrics.ts');
      const schedule = parseSchedule(flags.schedule, flags.timezone);
      const address = flags.listen ? parseListenAddress(flags.listen) : undefined;
      const metrics = new SweepMetrics({
        dryRun: flags.dryRun !== undefined,
        version: packageVersion(),
        leaderElect: flags.leaderElect === true,
      });
      // Every request of the process shares the rate limit; with --leader-elect, losing the Lease
      // abandons those in flight (the fence) and the process exits non-zero.
      const fence = new AbortController();
      const settings = clientSettings(flags, flags.leaderElect ? fence.signal : undefined);
      const serverClock = flags.watch ? new (await import('../watch/clock.ts')).ServerClock() : undefined;
      if (serverClock) settings.onServerDate = (date, at) => serverClock.noteAt(date, at);
      const { deps, options, sweep } = await prepareSweep(flags, io, metrics.observeResponse, settings);
      const checks: (() => Health)[] = [];
      const server = address ? await serveMetrics(metrics, address, () => firstProblem(checks)) : undefined;
      if (server) deps.logger.info('serving /healthz and /metrics', { listen: flags.listen });
      const stop = new AbortController();
      io.onStopSignal(() => {
        if (!stop.signal.aborted) deps.logger.info('stop requested: finishing the sweep in flight, if any');
        stop.abort();
      });
      const runSchedule = (signal: AbortSignal, leading?: AbortSignal) =>
        runOnSchedule(
          schedule,
          {
            // The schedule runs on the local clock; each sweep's "now" is the API server's (docs/clock.md).
            clock: () => new Date(),
            logger: deps.logger,
            sleep: abortableSleep,
            sweepOnce: () => sweep(deps, leading ? { ...options, signal: leading } : options),
            onSweep: (result, seconds, at) => metrics.record(result, seconds, at),
          },
          signal,
        );
      let end: 'released' | 'lost' = 'released';
      if (flags.watch) {
        const loop = await watchLoop(flags, { deps, options, sweep, schedule, metrics, settings, clock: serverClock! });
        checks.push(() => loop.health());
        // Followers keep the cache and the pre-judgements warm: the loop runs from the start, and writes only while leading.
        const looping = new AbortController();
        const running = loop.run(looping.signal);
        const stopLoop = () => looping.abort();
        stop.signal.addEventListener('abort', stopLoop, { once: true });
        try {
          if (flags.leaderElect) {
            end = await runAsLeader(flags, deps.logger, (leading) => leadWhile(loop, leading, running), stop.signal, {
              ...metrics.leaseObservers,
              settings,
              onLost: () => fence.abort(new Error('the Lease was lost: the request is abandoned')),
              onHealth: (h) => checks.push(h),
            });
          } else {
            loop.lead(stop.signal);
          }
        } finally {
          if (end === 'lost') looping.abort();
          else if (flags.leaderElect) stopLoop();
          await running;
        }
      } else if (flags.leaderElect) {
        end = await runAsLeader(flags, deps.logger, (s) => runSchedule(s, s), stop.signal, {
          ...metrics.leaseObservers,
          settings,
          onLost: () => fence.abort(new Error('the Lease was lost: the request is abandoned')),
          onHealth: (h) => checks.push(h),
        });
      } else await runSchedule(stop.signal);
      await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
      setExitCode(end === 'lost' ? EXIT.actionsFailed : EXIT.ok);
    });

  const policy = program.command('policy').description('check, explain and describe the policy');

  policy
    .command('validate')
    .description('check a policy file (raw policy.yaml or a whole ConfigMap manifest); "-" reads stdin')
    .argument('<file>', 'policy file, or - for stdin')
    .addHelpText(
      'after',
      '\nExamples:\n  $ imagepull-sweeper policy validate policy.yaml\n  $ kubectl get cm imagepull-sweeper-policy -n imagepull-sweeper -o yaml | imagepull-sweeper policy validate -',
    )
    .action(async (file: string) => {
      const text = await (file === '-' ? io.readStdin() : readPolicyFile(file)).catch((e: Error) => {
        throw new UsageError(`${file}: ${e.message}`);
      });
      const parsed = parsePolicyDocument(text);
      const name = problemSource({ kind: 'file', path: file });
      if (!parsed.ok) {
        for (const p of parsed.problems) io.stdout.write(`${formatProblem(name, p)}\n`);
        io.stderr.write(`${name}: ${parsed.problems.length} problem(s); the policy is invalid\n`);
        setExitCode(EXIT.invalid);
        return;
      }
      for (const w of parsed.warnings) io.stdout.write(`${formatProblem(name, w)} (warning)\n`);
      io.stdout.write(`${name}: valid (${parsed.policy.rules.length} rule(s))\n`);
      setExitCode(EXIT.ok);
    });

  withOutputAndConnectionOptions(
    withPolicyOptions(
      policy
        .command('explain')
        .description('print the effective policy for a namespace (and Job), and which rule each value came from')
        .requiredOption('-n, --namespace <ns>', 'namespace to explain')
        .option('--job <name>', "also apply this Job's annotations (read live)"),
    ),
  )
    .addHelpText(
      'after',
      '\nExamples:\n  $ imagepull-sweeper policy explain --namespace ci-42\n  $ imagepull-sweeper policy explain --namespace ci-42 --job build-7 --policy-file policy.yaml',
    )
    .action(async (flags: ConnectionFlags & PolicyFlags & { namespace: string; job?: string; output?: OutputFormat }) => {
      const location = policyLocation(flags, io.readStdin);
      const gateway = await tryGateway(flags, location.kind === 'configmap' || flags.job !== undefined, (n) =>
        io.stderr.write(`imagepull-sweeper: ${retryLine(n)}\n`),
      );
      const loaded = await loadPolicy(gateway, location);
      if (!loaded.ok) {
        if (loaded.kind === 'invalid') {
          for (const p of loaded.problems) io.stdout.write(`${formatProblem(problemSource(location), p)}\n`);
          throw new UsageError(`policy ${loaded.description} is invalid`);
        }
        if (loaded.kind === 'unreadable-file') throw new UsageError(`${loaded.description}: ${loaded.message}`);
        io.stderr.write(`imagepull-sweeper: reading ${loaded.description}: ${explainFailure(loaded.failure)}\n`);
        setExitCode(EXIT.unreachable);
        return;
      }
      const kueue = kueueConfigLocation(flags.kueueConfig);
      const code = await explainPolicy(io.stdout, gateway, loaded, flags.namespace, flags.job, outputFormat(flags.output, io), kueue);
      setExitCode(code);
    });

  policy
    .command('schema')
    .description('print the JSON Schema of policy.yaml (for editors via yaml-language-server)')
    .action(() => {
      io.stdout.write(`${JSON.stringify(policyJsonSchema(), null, 2)}\n`);
      setExitCode(EXIT.ok);
    });

  program
    .command('completion')
    .description('print a shell completion script')
    .addArgument(new Argument('<shell>', 'the shell').choices(SHELLS))
    .addHelpText('after', '\nExamples:\n  $ source <(imagepull-sweeper completion bash)\n  $ imagepull-sweeper completion fish | source')
    .action((shell: Shell) => {
      io.stdout.write(completionScript(shell, program));
      setExitCode(EXIT.ok);
    });

  program
    .command('version')
    .description('print the version')
    .action(() => {
      io.stdout.write(`${packageVersion()}\n`);
      setExitCode(EXIT.ok);
    });

  return program;
}

type Health = { ok: true } | { ok: false; why: string };

function firstProblem(checks: (() => Health)[]): Health {
  for (const check of checks) {
    const health = check();
    if (!health.ok) return health;
  }
  return { ok: true };
}

/** Leads until `leading` aborts; a loop that ended (crashed) while leading is an error. */
async function leadWhile(loop: import('../watch/loop.ts').WatchLoop, leading: AbortSignal, running: Promise<void>): Promise<void> {
  loop.lead(leading);
  const aborted = new Promise<void>((resolve) => leading.addEventListener('abort', () => resolve(), { once: true }));
  await Promise.race([
    aborted,
    running.then(() => {
      if (!leading.aborted) throw new Error('the watch loop ended while leading');
    }),
  ]);
}

/** `run --watch`: the loop of src/watch/ instead of the schedule's, the same sweep and metrics. */
async function watchLoop(
  flags: SweepFlags,
  run: Awaited<ReturnType<typeof prepareSweep>> & {
    schedule: import('../run/scheduler.ts').Schedule;
    metrics: import('../run/metrics.ts').SweepMetrics;
    settings: import('../kube/http.ts').ClientSettings;
    clock: import('../watch/clock.ts').ServerClock;
  },
): Promise<import('../watch/loop.ts').WatchLoop> {
  const [{ WatchLoop }, { TimerQueue }, { WatchMetrics }, { createWatchGateway }, { loadKubeConfig }, { abortableSleep }] =
    await Promise.all([
      import('../watch/loop.ts'),
      import('../watch/due.ts'),
      import('../watch/metrics.ts'),
      import('../kube/watch.ts'),
      import('./kube-config.ts'),
      import('../run/scheduler.ts'),
    ]);
  const watchGateway = createWatchGateway(loadKubeConfig(flags), {
    timeoutMs: requestTimeoutMs(flags.requestTimeout),
    onResponse: run.metrics.observeResponse,
    settings: run.settings,
  });
  const watchMetrics = new WatchMetrics(run.metrics.registry);
  return new WatchLoop(
    {
      sweepDeps: run.deps,
      sweep: run.sweep,
      watchGateway,
      schedule: run.schedule,
      clock: run.clock,
      wallClock: () => new Date(),
      timers: new TimerQueue(),
      sleep: abortableSleep,
      probe: (signal) => watchGateway.probeDate(signal, PROBE_TIMEOUT_MS),
      metrics: watchMetrics,
      onSweep: (result, seconds, at) => run.metrics.record(result, seconds, at),
    },
    run.options,
  );
}

/** A clock probe that takes longer than this tells nothing useful: given up, not retried. */
const PROBE_TIMEOUT_MS = 2_000;

function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/** Runs the CLI; returns the exit status instead of exiting, so tests and the binary share it. */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  let exitCode: number = EXIT.ok;
  const program = buildProgram(io, (code) => (exitCode = code));
  try {
    await program.parseAsync(argv, { from: 'user' });
    return exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      return error.exitCode === 0 || error.code === 'commander.helpDisplayed' || error.code === 'commander.version' ? 0 : EXIT.invalid;
    }
    const usage = asUsageError(error);
    if (usage) {
      io.stderr.write(`imagepull-sweeper: ${usage.message}\n`);
      return EXIT.invalid;
    }
    io.stderr.write(`imagepull-sweeper: unexpected error: ${(error as Error).stack ?? String(error)}\n`);
    return EXIT.actionsFailed;
  }
}
