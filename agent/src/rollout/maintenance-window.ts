// Maintenance windows in upstream lifecycle-manager's policy format (notes: module-installation.md §4): which
// window a runtime gets, whether it is open now, and when the next one opens. Pure: the clock is an argument.
//
// Policy: `{ rules: [{ match: {globalAccountID?, plan?, region?, platformRegion?}, windows: [...] }], default: window }`.
// A rule matches when any of its non-empty match fields, read as an unanchored regular expression, matches the
// runtime's attribute; only the first matching rule counts, and when it yields no window the default does.
// A window with `days` (three-letter English weekdays) recurs: `begin` and `end` are times of day with an offset
// (`01:00:00+00:00`, `21:00:00Z`), the day being the one the window begins on in that offset; `end <= begin` crosses
// midnight. A window without `days` is one absolute span (RFC 3339 `begin` and `end`).
// Besides the label, @skr-watcher/api gives zod its English messages (its schemas load them), which a policy's errors
// quote: `zod/mini` has none of its own.
import { LABELS } from '@skr-watcher/api';
import * as z from 'zod/mini';

const WEEKDAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'] as const;
const DAY_MS = 86_400_000;
/** How far ahead recurring windows are searched: a week and a day covers every weekday and a midnight crossing. */
const SEARCH_DAYS = 8;
/** Bounds on a policy read from a file: it is configuration, not data. */
const MAX_RULES = 1_000;
const MAX_WINDOWS = 100;
const MAX_PATTERN = 1_000;

const TIME_OF_DAY = /^([01]\d|2[0-3]):([0-5]\d):([0-5]\d)(Z|[+-]([01]\d|2[0-3]):([0-5]\d))$/;

const windowSchema = z.strictObject({
  days: z.optional(z.array(z.enum(WEEKDAYS)).check(z.maxLength(7))),
  begin: z.string().check(z.maxLength(64)),
  end: z.string().check(z.maxLength(64)),
});

const pattern = z.optional(z.string().check(z.maxLength(MAX_PATTERN)));

const policySchema = z.strictObject({
  rules: z._default(
    z
      .array(
        z.strictObject({
          match: z.strictObject({
            globalAccountID: pattern,
            plan: pattern,
            region: pattern,
            platformRegion: pattern,
          }),
          windows: z.array(windowSchema).check(z.maxLength(MAX_WINDOWS)),
        }),
      )
      .check(z.maxLength(MAX_RULES)),
    [],
  ),
  default: windowSchema,
});

export type PolicyWindow = z.infer<typeof windowSchema>;

/** The runtime attributes a rule matches on, read from the Kyma's labels (see `runtimeOfKyma`). */
export interface Runtime {
  globalAccountID?: string | undefined;
  plan?: string | undefined;
  region?: string | undefined;
  platformRegion?: string | undefined;
}

/** The Kyma labels upstream builds the runtime from. */
export const RUNTIME_LABELS: Readonly<Record<keyof Runtime, string>> = {
  globalAccountID: LABELS.globalAccountId,
  plan: 'kyma-project.io/broker-plan-name',
  region: 'kyma-project.io/region',
  platformRegion: 'kyma-project.io/platform-region',
};

export function runtimeOfKyma(labels: Readonly<Record<string, string>> | undefined): Runtime {
  const runtime: Runtime = {};
  for (const [key, label] of Object.entries(RUNTIME_LABELS) as [keyof Runtime, string][])
    if (labels?.[label] !== undefined) runtime[key] = labels[label];
  return runtime;
}

interface CompiledRule {
  match: [keyof Runtime, RegExp][];
  windows: PolicyWindow[];
}

export interface MaintenancePolicy {
  rules: readonly CompiledRule[];
  fallback: PolicyWindow;
}

export class PolicyError extends Error {
  override name = 'PolicyError';
}

/** Parses and checks a policy document (JSON text); every regex and time is validated here, not at use. */
export function parsePolicy(text: string): MaintenancePolicy {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new PolicyError(`the maintenance policy is not JSON: ${(error as Error).message}`);
  }
  const parsed = policySchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new PolicyError(
      `the maintenance policy is invalid at ${issue?.path.join('.') || '(root)'}: ${issue?.message}`,
    );
  }
  const checkWindow = (window: PolicyWindow, where: string) => {
    try {
      spansOf(window, 0);
    } catch (error) {
      throw new PolicyError(`the maintenance policy is invalid at ${where}: ${(error as Error).message}`);
    }
  };
  const rules = parsed.data.rules.map((rule, r) => {
    rule.windows.forEach((window, w) => checkWindow(window, `rules.${r}.windows.${w}`));
    const match: [keyof Runtime, RegExp][] = [];
    for (const [key, source] of Object.entries(rule.match) as [keyof Runtime, string | undefined][]) {
      if (!source) continue;
      try {
        match.push([key, new RegExp(source)]);
      } catch (error) {
        throw new PolicyError(
          `the maintenance policy is invalid at rules.${r}.match.${key}: ${(error as Error).message}`,
        );
      }
    }
    return { match, windows: rule.windows };
  });
  checkWindow(parsed.data.default, 'default');
  return { rules, fallback: parsed.data.default };
}

interface Span {
  begin: number;
  end: number;
}

/** Milliseconds after midnight UTC and the offset in ms, from `15:04:05Z07:00`. */
function timeOfDay(value: string): { ms: number; offsetMs: number } {
  const m = TIME_OF_DAY.exec(value);
  if (!m) throw new Error(`"${value}" is not a time of day like 21:00:00+00:00`);
  const [, h, min, s, zone, oh, om] = m;
  const offsetMs =
    zone === 'Z' ? 0 : (zone?.startsWith('-') ? -1 : 1) * (Number(oh) * 3_600_000 + Number(om) * 60_000);
  return { ms: Number(h) * 3_600_000 + Number(min) * 60_000 + Number(s) * 1_000, offsetMs };
}

function absolute(value: string): number {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(value))
    throw new Error(`"${value}" is not an RFC 3339 time`);
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) throw new Error(`"${value}" is not an RFC 3339 time`);
  return ms;
}

/** The spans of one window that could contain or follow `now`, earliest first. */
function spansOf(window: PolicyWindow, now: number): Span[] {
  if (!window.days || window.days.length === 0) {
    const begin = absolute(window.begin);
    const end = absolute(window.end);
    if (end <= begin) throw new Error(`end ${window.end} is not after begin ${window.begin}`);
    return [{ begin, end }];
  }
  const begin = timeOfDay(window.begin);
  const end = timeOfDay(window.end);
  const days = new Set(window.days);
  const spans: Span[] = [];
  // Day by day in the window's own offset, starting the day before so a window crossing midnight is found.
  const localMidnight = Math.floor((now + begin.offsetMs) / DAY_MS) * DAY_MS - begin.offsetMs;
  for (let d = -1; d < SEARCH_DAYS; d++) {
    const midnight = localMidnight + d * DAY_MS;
    const weekday = WEEKDAYS[new Date(midnight + begin.offsetMs).getUTCDay()] as (typeof WEEKDAYS)[number];
    if (!days.has(weekday)) continue;
    const spanBegin = midnight + begin.ms;
    // The end is a time of day in its own offset; the first such instant after the begin.
    let spanEnd = midnight + end.ms + begin.offsetMs - end.offsetMs;
    while (spanEnd <= spanBegin) spanEnd += DAY_MS;
    while (spanEnd - spanBegin > DAY_MS) spanEnd -= DAY_MS;
    spans.push({ begin: spanBegin, end: spanEnd });
  }
  return spans;
}

export interface ResolvedWindow {
  begin: Date;
  end: Date;
  /** The window is open now (`begin <= now`) with at least the minimum size left. */
  active: boolean;
  /** `rules[i]` that matched, or `default`. */
  source: string;
}

function ruleMatches(rule: CompiledRule, runtime: Runtime): boolean {
  return rule.match.some(([key, regex]) => {
    const value = runtime[key];
    return value !== undefined && value !== '' && regex.test(value);
  });
}

/**
 * The runtime's window: an ongoing one if at least `minWindowMs` of it is left, else the next one that is at least
 * that long; from the first matching rule, falling back to the default when that rule yields none.
 * `undefined` when neither yields a window (e.g. only absolute windows in the past).
 */
export function resolveWindow(
  policy: MaintenancePolicy,
  runtime: Runtime,
  now: Date,
  minWindowMs: number,
): ResolvedWindow | undefined {
  const at = now.getTime();
  const earliest = (windows: readonly PolicyWindow[]): Span | undefined => {
    let best: Span | undefined;
    for (const window of windows)
      for (const span of spansOf(window, at)) {
        if (Math.max(at, span.begin) + minWindowMs >= span.end) continue;
        if (!best || span.begin < best.begin) best = span;
      }
    return best;
  };
  const index = policy.rules.findIndex((rule) => ruleMatches(rule, runtime));
  const fromRule = index >= 0 ? earliest(policy.rules[index]?.windows ?? []) : undefined;
  const span = fromRule ?? earliest([policy.fallback]);
  if (!span) return undefined;
  return {
    begin: new Date(span.begin),
    end: new Date(span.end),
    active: span.begin <= at && at < span.end,
    source: fromRule ? `rules[${index}]` : 'default',
  };
}

export type UpgradeGate =
  | { kind: 'proceed' }
  /** Keep the running version; the Kyma's module entry says `maintenance: true` and this message. */
  | { kind: 'wait'; message: string; opensAt?: Date }
  /** The policy could not be read: an Error on this module only. */
  | { kind: 'error'; message: string };

export interface UpgradeQuestion {
  /** `ModuleTemplate.spec.requiresDowntime` of the target version. */
  requiresDowntime: boolean;
  /** `Kyma.spec.skipMaintenanceWindows`. */
  skipMaintenanceWindows: boolean;
  /** The version in the Kyma's `status.modules` entry; absent for a new install, which never waits. */
  installedVersion: string | undefined;
  targetVersion: string;
  runtime: Runtime;
  now: Date;
  /** The policy, or why it could not be read (a missing policy file while one is configured is such a reason). */
  policy: MaintenancePolicy | { error: string } | undefined;
  minWindowMs: number;
}

/** Whether a module may move to its target version now (upstream's IsRequired / IsActive). */
export function gateUpgrade(question: UpgradeQuestion): UpgradeGate {
  const required =
    question.requiresDowntime &&
    !question.skipMaintenanceWindows &&
    question.installedVersion !== undefined &&
    question.installedVersion !== question.targetVersion;
  if (!required) return { kind: 'proceed' };
  const policy = question.policy;
  if (!policy || 'error' in policy)
    return {
      kind: 'error',
      message: `cannot tell whether a maintenance window is open: ${policy ? policy.error : 'no maintenance policy is configured'}`,
    };
  const window = resolveWindow(policy, question.runtime, question.now, question.minWindowMs);
  if (window?.active) return { kind: 'proceed' };
  const base = `waiting for the next maintenance window to upgrade from ${question.installedVersion} to ${question.targetVersion}`;
  if (!window) return { kind: 'wait', message: `${base}: the policy gives this runtime no future window` };
  return {
    kind: 'wait',
    message: `${base}: opens ${window.begin.toISOString()} (${window.source})`,
    opensAt: window.begin,
  };
}
