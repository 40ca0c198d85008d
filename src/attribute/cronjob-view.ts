import type { V1CronJob } from '@kubernetes/client-node';
import type { CronJobView } from '../model.ts';
import { objectIdentity } from './job-view.ts';

/** Pure: the parts of a V1CronJob the suspension judgement needs. */
export function toCronJobView(cronJob: V1CronJob): CronJobView {
  const meta = cronJob.metadata ?? {};
  const last = cronJob.status?.lastSuccessfulTime as Date | string | undefined;
  return {
    ...objectIdentity(meta),
    suspended: cronJob.spec?.suspend === true,
    lastSuccessfulTime: last === undefined || last === null ? undefined : typeof last === 'string' ? last : last.toISOString(),
  };
}
