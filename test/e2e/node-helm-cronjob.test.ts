// The Helm chart's CronJob mode on the real node: test/e2e/node-cronjob.test.ts, run on the objects
// `helm template` renders (the same overlay for the node applied to them) instead of manifests/.
process.env.IMAGEPULL_SWEEPER_NODE_CRONJOB_SOURCE = 'helm';
await import('./node-cronjob.test.ts');
