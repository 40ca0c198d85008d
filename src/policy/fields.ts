// Field types of the policy file (zod), each with its messages: durations, counts, fractions,
// namespace globs and label selectors.
import * as z from 'zod';
import { tryParseGoDuration } from './duration.ts';
import { namespaceGlobError } from './glob.ts';
import { describeValue, issueFrom } from './messages.ts';
import { labelKeyError, labelValueError, requirementValuesError, SELECTOR_OPERATORS } from './selector.ts';

const GO_DURATION_PATTERN = '^[+]?(0|(([0-9]+[.]?[0-9]*|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$';

export function duration(description: string, defaultValue?: string) {
  return z
    .string({
      error: (iss) =>
        iss.input === undefined ? undefined : `expected a duration string such as "30s" or "1h30m", got ${describeValue(iss.input)}`,
    })
    .superRefine((value, ctx) => {
      const parsed = tryParseGoDuration(value);
      if (!parsed.ok) issueFrom(parsed.error, ctx);
    })
    .meta({
      description: `${description} Go duration syntax, e.g. "30s", "10m", "1h30m".`,
      pattern: GO_DURATION_PATTERN,
      ...(defaultValue !== undefined ? { default: defaultValue } : {}),
    });
}

/** A duration, or the number 0 (YAML `0`: never). */
export function durationOrNever(description: string, defaultValue: string) {
  const expected = (iss: { input?: unknown }) =>
    `expected a duration string such as "60s", or 0 for never, got ${describeValue(iss.input)}`;
  return z
    .union([duration(description), z.literal(0)], { error: expected })
    .meta({ description: `${description} Go duration syntax, e.g. "30s", "10m".`, default: defaultValue });
}

export function positiveInt(description: string, defaultValue: number) {
  const message = (iss: { input?: unknown }) =>
    iss.input === undefined ? undefined : `expected a positive integer, got ${describeValue(iss.input)}`;
  return z.int({ error: message }).min(1, { error: message }).meta({ description, default: defaultValue });
}

const fractionMessage = (iss: { input?: unknown }) => `expected a fraction greater than 0 and at most 1, got ${describeValue(iss.input)}`;

export function fraction(description: string, defaultValue: number) {
  return z
    .number({ error: (iss) => (iss.input === undefined ? undefined : `expected a number, got ${describeValue(iss.input)}`) })
    .gt(0, { error: fractionMessage })
    .lte(1, { error: fractionMessage })
    .meta({ description, default: defaultValue });
}

const labelValueSchema = z.string().superRefine((value, ctx) => issueFrom(labelValueError(value), ctx));

const matchLabelsSchema = z
  .record(z.string(), labelValueSchema)
  .superRefine(
    (labels, ctx) => {
      if (typeof labels !== 'object' || labels === null || Array.isArray(labels)) return;
      for (const key of Object.keys(labels)) issueFrom(labelKeyError(key), ctx, { path: [key], at: 'key' });
    },
    { when: () => true },
  )
  .meta({ description: 'Labels the namespace must have, with these exact values.' });

const requirementSchema = z
  .strictObject({
    key: z.string().superRefine((key, ctx) => issueFrom(labelKeyError(key), ctx)),
    operator: z.enum(SELECTOR_OPERATORS),
    values: z.array(labelValueSchema).optional(),
  })
  .superRefine((req, ctx) => {
    issueFrom(requirementValuesError(req.operator, req.values), ctx, { path: req.values ? ['values'] : [] });
  });

export const labelSelectorSchema = z
  .strictObject({
    matchLabels: matchLabelsSchema.optional(),
    matchExpressions: z
      .array(requirementSchema)
      .meta({ description: 'Label requirements (In, NotIn, Exists, DoesNotExist), all of which must hold.' })
      .optional(),
  })
  .meta({ description: 'Kubernetes label selector over the namespace labels; an empty selector matches every namespace.' });

export const globSchema = z
  .string()
  .superRefine((glob, ctx) => issueFrom(namespaceGlobError(glob), ctx))
  .meta({ pattern: '^[a-z0-9*?\\[\\]!-]+$' });
