// Where each e2e file runs: the one place that says so, for `npm run test:e2e` (every file) and
// `npm run test:e2e:compat` (a subset per older minor), both run by test/support/run-e2e.ts.
//
// One control plane and one node per runtime serve the whole run. The files run in phases, one
// after another; in a phase, its lanes run side by side, each one file at a time. Most files wait
// (on graces, pulls, the kubelet's back-off, the controllers) far more than they compute, so
// three lanes share CI's 2 cores. A file whose state other files could see or disturb is named
// below with the reason, in the lane that keeps it from them.

export interface Lane {
  readonly name: string;
  /** File names in test/e2e/, run in this order. */
  readonly files: readonly string[];
}
/** Lanes that run side by side. */
export type Phase = readonly Lane[];

/**
 * Files that share cluster-scoped objects or the install namespace `imagepull-sweeper` (the
 * shipped ClusterRole and guard, the policy ConfigMap there, the Lease `imagepull-sweeper`):
 * one at a time, in one lane.
 */
const SHARED_INSTALL: Readonly<Record<string, string>> = {
  'guard.test.ts': 'applies manifests/ and deletes their policy ConfigMap after; replaces the Lease imagepull-sweeper',
  'manifests.test.ts': 'applies manifests/ and deletes their policy ConfigMap; creates ConfigMaps in imagepull-sweeper',
  'dry-run-server.test.ts': 'applies manifests/ and deletes their policy ConfigMap after',
  'owners.test.ts': 'applies manifests/; installs the Batchlet CRD',
  'owners-node.test.ts': 'applies manifests/; installs the Batchlet CRD',
  'node-jobset.test.ts': 'applies manifests/; installs the JobSet CRD and its webhooks',
  'node-force-delete.test.ts': 'applies manifests/ and deletes their policy ConfigMap after',
  'node-heal.test.ts': 'applies manifests/ and manifests/heal/ (a ClusterRole that reads Secrets), removed after',
  'helm.test.ts': "deletes the shipped ClusterRole, its binding and the guard; installs the chart's under the same names",
  'leader-election.test.ts': 'applies manifests/; deletes and holds the Lease imagepull-sweeper',
  'watch-leader.test.ts': 'applies manifests/; deletes and holds the Lease imagepull-sweeper',
};

/**
 * The shipped CronJob run in-cluster: it sweeps every namespace with the shipped policy, so it
 * would fail, settle and force-delete what other files' tests own. Run with nothing on the
 * shared cluster that a sweep could act on.
 */
const CLUSTER_WIDE_SWEEP: Readonly<Record<string, string>> = {
  'node-cronjob.test.ts': 'the shipped CronJob sweeps every namespace; applies manifests/ and edits the namespace imagepull-sweeper',
  'node-helm-cronjob.test.ts': "the chart's CronJob sweeps every namespace; applies its objects to imagepull-sweeper",
};

/** Beside the cluster-wide sweeps: nothing on the shared cluster that a sweep could act on. */
const NOTHING_TO_SWEEP: Readonly<Record<string, string>> = {
  'image.test.ts': 'no cluster',
  'continue-token.test.ts': 'its own control plane',
  'watch-faults.test.ts': 'its own control plane',
  'watch-cache.test.ts': 'its own control plane (the watch cache on, its history not grown by other files)',
  'hostile-data.test.ts': 'its own control plane',
  'tls-trust.test.ts': 'its sweeps never reach the cluster',
  'kubectl-plugin.test.ts': 'no cluster',
  'alerts.test.ts': 'promtool only',
};

// The other files: each test in its own namespaces, its sweeps limited to them. They fill the
// install lane after its own files, and two more lanes: one of the files that compute most
// (many objects, many CLI processes), so they do not starve each other, and one of real pulls.
// The files with tight timing (watch, leader election) come last in their lanes. Faults and
// crash safety churn hundreds of Jobs, so each starts a control plane of its own
// (useTestCluster's ownControlPlane): on the shared one, its Job controller (20 requests a
// second) fell behind by over 40 s, and the files beside them timed out waiting for a Job's pods
// to appear or be deleted, wherever they sat in the lanes.

/** The whole suite (`npm run test:e2e`), on the default minor. */
export const E2E: readonly Phase[] = [
  [
    {
      name: 'install',
      files: [
        'guard.test.ts',
        'manifests.test.ts',
        'dry-run-server.test.ts',
        'owners.test.ts',
        'owners-node.test.ts',
        'node-jobset.test.ts',
        'node-force-delete.test.ts',
        'node-heal.test.ts',
        'helm.test.ts',
        'node-fail.test.ts',
        'leader-election.test.ts',
        'watch-leader.test.ts',
      ],
    },
    {
      name: 'compute',
      files: [
        'faults.test.ts',
        'reliability.test.ts',
        'bad-policies.test.ts',
        'observe.test.ts',
        'requests-per-job.test.ts',
        'sweep.test.ts',
        'controlplane.test.ts',
        'prometheus.test.ts',
        // Its kube-state-metrics, Prometheus and sweeps see only its own two namespaces.
        'alerts-cronjob.test.ts',
        'secrets.test.ts',
        'cli.test.ts',
        // Its Kueue sees only Jobs labelled with its queues; evictions and re-admissions on a 20 s
        // timeout.
        'node-kueue.test.ts',
      ],
    },
    {
      name: 'pull',
      files: [
        // These rewrite the shared nodes' registry configuration.
        'node-pull.test.ts',
        'node-pull-refused.test.ts',
        'node-mirror-outage.test.ts',
        'node-pull-cancelled.test.ts',
        'node-stalled.test.ts',
        'kubernetes-versions.test.ts',
        'node-sweep.test.ts',
        'node-restarted.test.ts',
        'node-clock.test.ts',
        'capacity.test.ts',
        'node-image-volume.test.ts',
        'node-basics.test.ts',
        'cronjob.test.ts',
        'watch.test.ts',
      ],
    },
  ],
  [
    { name: 'cluster-wide', files: Object.keys(CLUSTER_WIDE_SWEEP) },
    { name: 'own-cluster', files: Object.keys(NOTHING_TO_SWEEP) },
  ],
];

const COMPAT_BASE = [
  'kubernetes-versions.test.ts',
  'node-fail.test.ts',
  'node-sweep.test.ts',
  'guard.test.ts',
  'cronjob.test.ts',
  'cli.test.ts',
  // The watch and the pod mechanism of owners rules, on every minor.
  'watch.test.ts',
  'owners-node.test.ts',
];
/** The compatibility subset of each minor (`npm run test:e2e:compat`), run in E2E's lanes. */
export const COMPAT_FILES: Readonly<Record<string, readonly string[]>> = {
  '1.34': COMPAT_BASE,
  '1.35': COMPAT_BASE,
  // Image volumes are GA from 1.36.
  '1.36': [...COMPAT_BASE, 'node-image-volume.test.ts'],
  '1.37': [...COMPAT_BASE, 'node-image-volume.test.ts'],
};

/** E2E's phases and lanes, keeping only `files` (in E2E's order); empty lanes and phases dropped. */
export function subset(files: readonly string[]): Phase[] {
  const wanted = new Set(files);
  const placed = E2E.flatMap((phase) => phase.flatMap((lane) => lane.files));
  const unplaced = files.filter((f) => !placed.includes(f));
  if (unplaced.length > 0) throw new Error(`not in any lane of test/e2e/suites.ts: ${unplaced.join(', ')}`);
  return E2E.map((phase) =>
    phase.map((lane) => ({ ...lane, files: lane.files.filter((f) => wanted.has(f)) })).filter((l) => l.files.length > 0),
  ).filter((phase) => phase.length > 0);
}

/** The compatibility subset's phases for `minor` (e.g. `1.34`). */
export function compatPhases(minor: string): Phase[] {
  const files = COMPAT_FILES[minor.replace(/^v/, '')];
  if (!files)
    throw new Error(`no compatibility subset for Kubernetes ${minor} in test/e2e/suites.ts (${Object.keys(COMPAT_FILES).join(', ')})`);
  return subset(files);
}

/**
 * Problems with E2E against the files in test/e2e/: each file in exactly one lane, the files of
 * SHARED_INSTALL in one lane, the cluster-wide sweeps beside nothing but NOTHING_TO_SWEEP.
 */
export function placementProblems(testFiles: readonly string[]): string[] {
  const placed = E2E.flatMap((phase) => phase.flatMap((lane) => lane.files));
  const problems: string[] = [];
  for (const f of testFiles) if (!placed.includes(f)) problems.push(`${f} is in no lane`);
  for (const f of new Set(placed)) {
    const times = placed.filter((p) => p === f).length;
    if (times > 1) problems.push(`${f} is in ${times} lanes`);
    if (!testFiles.includes(f)) problems.push(`${f} is not a file of test/e2e/`);
  }
  const laneOf = (f: string) => E2E.flatMap((phase) => phase).find((lane) => lane.files.includes(f))?.name;
  const installLanes = new Set(Object.keys(SHARED_INSTALL).map(laneOf));
  if (installLanes.size > 1) problems.push(`the SHARED_INSTALL files are in lanes ${[...installLanes].join(', ')}`);
  for (const phase of E2E) {
    const files = phase.flatMap((lane) => lane.files);
    if (!files.some((f) => f in CLUSTER_WIDE_SWEEP)) continue;
    for (const f of files.filter((f) => !(f in CLUSTER_WIDE_SWEEP) && !(f in NOTHING_TO_SWEEP))) {
      problems.push(`${f} runs beside a cluster-wide sweep`);
    }
  }
  return problems;
}
