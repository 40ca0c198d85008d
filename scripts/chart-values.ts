// The chart's values: their types and meaning, the one source of charts/imagepull-sweeper/
// values.schema.json and of the values table of its README.md (scripts/chart.ts writes both).
// The defaults are values.yaml's; test/unit/chart.test.ts checks values.yaml against this.
import * as z from 'zod';

/** A Kubernetes object the chart passes through as written (affinity, a toleration, an env entry...). */
const object = () => z.looseObject({});
const stringMap = () => z.record(z.string(), z.string());

export const chartValuesSchema = z
  .strictObject({
    mode: z
      .enum(['cronjob', 'deployment'])
      .describe('`cronjob`: one sweep per schedule slot; `deployment`: replicas of `run --leader-elect`, one sweeps (docs/deployment.md)'),
    schedule: z.string().min(1).describe('cron schedule of the sweeps, both modes (5 fields, or 6 with seconds first)'),
    timeZone: z.string().min(1).describe("the CronJob's time zone (`run` in deployment mode schedules in UTC)"),
    image: z
      .strictObject({
        repository: z.string().min(1).describe("the image, built from the repository's Dockerfile and pushed to your registry"),
        tag: z.string().describe("the image's tag; empty: the chart's appVersion"),
        digest: z
          .union([z.literal(''), z.string().regex(/^sha256:[0-9a-f]{64}$/)])
          .describe('`sha256:...`: pull by digest (wins over the tag)'),
        pullPolicy: z.enum(['Always', 'IfNotPresent', 'Never']).describe('imagePullPolicy'),
      })
      .describe('the sweeper image'),
    imagePullSecrets: z
      .array(z.strictObject({ name: z.string().min(1) }))
      .describe('Secrets to pull the image with, e.g. `[{name: regcred}]`'),
    serviceAccount: z.strictObject({
      create: z.boolean().describe('create the ServiceAccount (else it must exist)'),
      name: z.string().describe('its name; empty: `imagepull-sweeper` (the RBAC and the guard name it)'),
      annotations: stringMap().describe('annotations on it (e.g. a cloud workload identity)'),
    }),
    rbac: z.strictObject({
      create: z.boolean().describe('create the least-privilege ClusterRole, Roles and bindings (docs/security.md)'),
    }),
    extraArgs: z
      .array(z.string())
      .describe('more arguments of `sweep` (cronjob) or `run` (deployment), e.g. `["--request-timeout", "10s"]`'),
    extraEnv: z.array(object()).describe("more environment variables of the sweeper's container (EnvVar objects)"),
    resources: object().describe("the sweeper container's resources"),
    podSecurityContext: object().describe(
      "the pod's securityContext. OpenShift's restricted SCC assigns the uid: set runAsUser, runAsGroup and fsGroup to null",
    ),
    securityContext: object().describe("the container's securityContext (OpenShift: runAsUser and runAsGroup null)"),
    priorityClassName: z.string().describe("the sweeper pods' PriorityClass; empty: none"),
    nodeSelector: stringMap().describe("where the sweeper's pods run"),
    tolerations: z.array(object()).describe("the sweeper pods' tolerations"),
    affinity: object().describe("the sweeper pods' affinity"),
    topologySpreadConstraints: z
      .array(object())
      .describe('spread of the pods; empty in deployment mode: across nodes where possible (`kubernetes.io/hostname`, ScheduleAnyway)'),
    deployment: z
      .strictObject({
        replicas: z.int().min(0).describe('replicas; one holds the Lease and sweeps (0: none runs)'),
        metricsPort: z.int().min(1).max(65535).describe('port of `/metrics` and `/healthz`'),
        watch: z
          .boolean()
          .describe(
            '`run --watch`: act the moment a grace runs out, the schedule as a backstop (docs/deployment.md); false: on the schedule only',
          ),
      })
      .describe('deployment mode'),
    podDisruptionBudget: z
      .strictObject({
        enabled: z.boolean().describe('a PodDisruptionBudget for the Deployment (deployment mode)'),
        maxUnavailable: z.union([z.int().min(0), z.string().regex(/^\d+%$/)]).describe('pods a voluntary disruption may take at once'),
      })
      .describe('deployment mode'),
    guard: z.strictObject({
      enabled: z.boolean().describe("the admission guard fencing the ServiceAccount's writes (a ValidatingAdmissionPolicy)"),
    }),
    heal: z
      .strictObject({
        enabled: z
          .boolean()
          .describe(
            'the RBAC healing needs (`heal: true` in the policy; docs/policy.md): create `pods/eviction`, get ServiceAccounts (as `manifests/heal`)',
          ),
        readSecrets: z
          .boolean()
          .describe(
            'with it, get Secrets (their metadata only is asked for): a pull Secret changed since the pod got stuck is evidence; false: it is not',
          ),
      })
      .describe('healing (docs/security.md "Healing")'),
    createNamespace: z.boolean().describe('create the release namespace with the `restricted` Pod Security labels'),
    serviceMonitor: z.strictObject({
      enabled: z.boolean().describe('a Prometheus Operator ServiceMonitor (deployment mode)'),
      interval: z
        .string()
        .regex(/^\d+[smh]$/)
        .describe('scrape interval'),
      labels: stringMap().describe('labels on it (for your Prometheus selector)'),
    }),
    prometheusRule: z.strictObject({
      enabled: z.boolean().describe('the alerts of `files/alerts.yaml` as a PrometheusRule'),
      runbookBaseUrl: z
        .string()
        .regex(/^https?:\/\/[^\s#]+$/)
        .describe("where the alerts' runbooks are: each `runbook_url` is this plus `#alert-name`"),
      labels: stringMap().describe('labels on it (for your Prometheus rule selector)'),
    }),
    dashboard: z.strictObject({
      enabled: z.boolean().describe("the Grafana dashboard as a ConfigMap for Grafana's sidecar"),
      labels: stringMap().describe('labels the sidecar looks for'),
    }),
    tests: z.strictObject({
      enabled: z.boolean().describe('`helm test`: a pod that runs `sweep --dry-run` on the release namespace with the ServiceAccount'),
    }),
    labels: stringMap().describe('labels added to every object'),
    annotations: stringMap().describe('annotations added to every object'),
    podLabels: stringMap().describe("labels added to the sweeper's pods"),
    podAnnotations: stringMap().describe("annotations added to the sweeper's pods"),
    // Helm sets it when this chart is a dependency of another (values shared by all subcharts).
    global: object().optional().describe("Helm's values shared with subcharts"),
    policy: z.string().min(1).describe('`policy.yaml` of the ConfigMap `imagepull-sweeper-policy` (`--set-file policy=my-policy.yaml`)'),
  })
  .describe('Values of the imagepull-sweeper chart');

export type ChartValues = z.infer<typeof chartValuesSchema>;
