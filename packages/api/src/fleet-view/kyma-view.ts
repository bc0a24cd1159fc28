// One Kyma as the on-call engineer reads it, built from what the agent records in KCP: the Kyma's status (state,
// conditions, modules) and, per module, its Manifest (state, last operation). No SKR is contacted: the KCP Kyma's
// status is where the agent reports the SKR side. Pure: kubectl-skr and the agent's console read the objects their
// own way and both show this view.
import { ANNOTATIONS, LABELS } from '../constants.js';
import { trackedObject } from '../resources.js';
import type { Condition } from '../schemas/common.js';
import type { Kyma } from '../schemas/kyma.js';
import type { Manifest } from '../schemas/manifest.js';
import { parseKyma, parseManifest } from '../schemas/parse.js';
import { byCodeUnit } from '../order.js';

const PREFIX = 'operator.kyma-project.io';

/** On a paused Kyma: who paused it, why, and since when (RFC 3339); removed again by resume. */
export const PAUSE_ANNOTATIONS = {
  by: `${PREFIX}/skip-reconciliation-by`,
  reason: `${PREFIX}/skip-reconciliation-reason`,
  since: `${PREFIX}/skip-reconciliation-since`,
} as const;

/** The agent's condition types on a Kyma that the views read (agent/src/reconcile/status.ts writes them). */
export const CONDITION_TYPES = {
  skrWebhook: 'SKRWebhook',
  skrConnected: 'SKRConnected',
  syncResourcesApplied: 'SyncResourcesApplied',
} as const;

export interface ModuleView {
  name: string;
  state: string;
  version?: string;
  channel?: string;
  /** The module's message, else its Manifest's last operation when that is not Ready. */
  reason?: string;
  manifest?: {
    name: string;
    state: string;
    lastOperation?: string;
    lastUpdateTime?: string;
  };
}

export type CertificateView =
  | { kind: 'found'; secret: string; notAfter: Date; notBefore: Date; commonName: string; issuer: string }
  | { kind: 'missing'; secret: string }
  | { kind: 'unreadable'; secret: string; why: string };

export interface KymaView {
  name: string;
  namespace: string;
  runtimeId?: string;
  /** `status.state`, or `Unknown` when the agent wrote none yet. */
  state: string;
  /** Why it is not Ready, in one line: the first False condition, else the first failing module. */
  reason?: string;
  paused?: { by?: string; reason?: string; since?: string };
  channel?: string;
  /** The agent replica that owns it (sharding). */
  owner?: string;
  /** Set when the SKR webhook runs outside the SKR (URL mode). */
  webhookUrl?: string;
  lastOperation?: { operation: string; lastUpdateTime?: string };
  conditions: Condition[];
  modules: ModuleView[];
  certificate?: CertificateView;
  condition(type: string): Condition | undefined;
}

/** Severity order for listing: the unhealthy first. */
const SEVERITY: Record<string, number> = {
  Error: 0,
  Warning: 1,
  Deleting: 2,
  Processing: 3,
  Unknown: 4,
  Ready: 6,
};

export function severityOf(view: Pick<KymaView, 'state' | 'paused'>): number {
  return SEVERITY[view.state] ?? 5;
}

export function isHealthy(view: Pick<KymaView, 'state' | 'paused'>): boolean {
  return view.state === 'Ready' && !view.paused;
}

/** Reads a Kyma as stored; one that does not parse is shown with what can be read of it, never dropped. */
export function readKyma(object: unknown): Kyma {
  try {
    return parseKyma(object, 'Kyma');
  } catch {
    const raw = object as Partial<Kyma>;
    return { ...raw, metadata: raw.metadata ?? { name: '(unnamed)' }, spec: {}, status: undefined } as Kyma;
  }
}

export function readManifests(objects: unknown[]): Manifest[] {
  const manifests: Manifest[] = [];
  for (const object of objects) {
    try {
      manifests.push(parseManifest(object, 'Manifest'));
    } catch {
      // A Manifest another tool wrote in a shape we do not know is left out of the view, not fatal.
    }
  }
  return manifests;
}

export function kymaView(kyma: Kyma, manifests: Manifest[]): KymaView {
  const labels = kyma.metadata.labels ?? {};
  const annotations = kyma.metadata.annotations ?? {};
  const status = kyma.status;
  const conditions = status?.conditions ?? [];
  const ofThisKyma = manifests.filter((m) => m.metadata.labels?.[LABELS.kymaName] === kyma.metadata.name);
  const modules: ModuleView[] = (status?.modules ?? []).map((module) => {
    const trackedName = trackedObject(module.manifest)?.name;
    const manifest =
      ofThisKyma.find((m) => m.metadata.name === trackedName) ??
      ofThisKyma.find((m) => m.metadata.labels?.[LABELS.moduleName] === module.name);
    const manifestState = manifest?.status?.state || (manifest ? 'Processing' : undefined);
    const lastOperation = manifest?.status?.lastOperation;
    const reason =
      module.message ||
      (manifest && manifestState !== 'Ready' && lastOperation ? lastOperation.operation : undefined);
    return {
      name: module.name,
      state: module.state,
      ...(module.version ? { version: module.version } : {}),
      ...(module.channel ? { channel: module.channel } : {}),
      ...(reason ? { reason } : {}),
      ...(manifest
        ? {
            manifest: {
              name: manifest.metadata.name,
              state: manifestState ?? 'Processing',
              ...(lastOperation ? { lastOperation: lastOperation.operation } : {}),
              ...(lastOperation?.lastUpdateTime
                ? { lastUpdateTime: String(lastOperation.lastUpdateTime) }
                : {}),
            },
          }
        : {}),
    };
  });
  const paused = labels[LABELS.skipReconciliation] === 'true';
  const failing = conditions.find((c) => c.status === 'False');
  const failingModule = modules.find((m) => m.state === 'Error' || m.state === 'Warning');
  const reason = failing
    ? `${failing.type} ${failing.reason ?? ''}: ${failing.message ?? ''}`.replace(/ :/, ':')
    : failingModule
      ? `module ${failingModule.name}: ${failingModule.reason ?? failingModule.state}`
      : status?.state
        ? undefined
        : 'no status yet: no agent pass has written one';
  const view: KymaView = {
    name: kyma.metadata.name,
    namespace: kyma.metadata.namespace ?? '',
    state: status?.state || 'Unknown',
    conditions,
    modules,
    condition: (type) => conditions.find((c) => c.type === type),
    ...(labels[LABELS.runtimeId] ? { runtimeId: labels[LABELS.runtimeId] } : {}),
    ...(reason ? { reason } : {}),
    ...(paused
      ? {
          paused: {
            ...(annotations[PAUSE_ANNOTATIONS.by] ? { by: annotations[PAUSE_ANNOTATIONS.by] } : {}),
            ...(annotations[PAUSE_ANNOTATIONS.reason]
              ? { reason: annotations[PAUSE_ANNOTATIONS.reason] }
              : {}),
            ...(annotations[PAUSE_ANNOTATIONS.since] ? { since: annotations[PAUSE_ANNOTATIONS.since] } : {}),
          },
        }
      : {}),
    ...(status?.activeChannel || kyma.spec.channel
      ? { channel: status?.activeChannel || kyma.spec.channel }
      : {}),
    ...(labels[LABELS.shardOwner] ? { owner: labels[LABELS.shardOwner] } : {}),
    ...(annotations[ANNOTATIONS.skrWebhookUrl] ? { webhookUrl: annotations[ANNOTATIONS.skrWebhookUrl] } : {}),
    ...(status?.lastOperation
      ? {
          lastOperation: {
            operation: status.lastOperation.operation,
            ...(status.lastOperation.lastUpdateTime
              ? { lastUpdateTime: String(status.lastOperation.lastUpdateTime) }
              : {}),
          },
        }
      : {}),
  };
  return view;
}

/** The view as data for -o json|yaml: no functions, dates as RFC 3339. */
export function viewData(view: KymaView): Record<string, unknown> {
  const { condition: _condition, certificate, ...rest } = view;
  return {
    ...rest,
    ...(certificate
      ? {
          certificate:
            certificate.kind === 'found'
              ? {
                  ...certificate,
                  notAfter: certificate.notAfter.toISOString(),
                  notBefore: certificate.notBefore.toISOString(),
                }
              : certificate,
        }
      : {}),
  };
}

/** The webhook certificate as a view shows it, from what the certificate says of itself. */
export function foundCertificate(
  secret: string,
  info: { notAfter: Date; notBefore: Date; commonName: string; issuerCommonName: string },
): CertificateView {
  return {
    kind: 'found',
    secret,
    notAfter: info.notAfter,
    notBefore: info.notBefore,
    commonName: info.commonName,
    issuer: info.issuerCommonName,
  };
}

/** One Event on a Kyma as the views list it. */
export interface KymaEvent {
  time?: string;
  type: string;
  reason: string;
  count: number;
  from: string;
  message: string;
}

/** The fields of a core/v1 Event that the views read (client-node's CoreV1Event has them all). */
export interface EventFields {
  metadata: { creationTimestamp?: Date | string };
  type?: string;
  reason?: string;
  message?: string;
  count?: number;
  series?: { count?: number };
  reportingComponent?: string;
  source?: { component?: string };
  eventTime?: Date | string;
  firstTimestamp?: Date | string;
  lastTimestamp?: Date | string;
}

/** A Kyma's Events, oldest first. */
export function kymaEvents(events: EventFields[]): KymaEvent[] {
  const timeOf = (event: EventFields) =>
    event.lastTimestamp ?? event.eventTime ?? event.firstTimestamp ?? event.metadata.creationTimestamp;
  return events
    .map((event) => ({ event, at: timeOf(event) }))
    .sort((a, b) => new Date(a.at ?? 0).getTime() - new Date(b.at ?? 0).getTime())
    .map(({ event, at }) => ({
      ...(at ? { time: new Date(at).toISOString() } : {}),
      type: event.type ?? 'Normal',
      reason: event.reason ?? '',
      count: event.count ?? event.series?.count ?? 1,
      from: event.reportingComponent || event.source?.component || '-',
      message: event.message ?? '',
    }));
}

export interface ModuleSummary {
  name: string;
  kymas: number;
  states: Record<string, number>;
  versions: Record<string, number>;
}

export interface FleetReport {
  namespace: string;
  kymas: { total: number; states: Record<string, number>; paused: number };
  modules: ModuleSummary[];
  /** Every Kyma, the unhealthy first (by severity, then name). */
  rows: KymaView[];
}

/** The fleet at a glance from the Kymas and Manifests of one namespace, as stored. */
export function fleetReport(
  namespace: string,
  kymaObjects: unknown[],
  manifestObjects: unknown[],
): FleetReport {
  const manifests = readManifests(manifestObjects);
  const rows = kymaObjects
    .map((object) => kymaView(readKyma(object), manifests))
    .sort((a, b) => severityOf(a) - severityOf(b) || byCodeUnit(a.name, b.name));
  const states: Record<string, number> = {};
  const modules = new Map<string, ModuleSummary>();
  for (const row of rows) {
    states[row.state] = (states[row.state] ?? 0) + 1;
    for (const module of row.modules) {
      const summary = modules.get(module.name) ?? { name: module.name, kymas: 0, states: {}, versions: {} };
      summary.kymas++;
      summary.states[module.state] = (summary.states[module.state] ?? 0) + 1;
      const version = module.version ?? '(none)';
      summary.versions[version] = (summary.versions[version] ?? 0) + 1;
      modules.set(module.name, summary);
    }
  }
  return {
    namespace,
    kymas: { total: rows.length, states, paused: rows.filter((row) => row.paused).length },
    modules: [...modules.values()].sort((a, b) => byCodeUnit(a.name, b.name)),
    rows,
  };
}
