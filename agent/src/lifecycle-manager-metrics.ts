// Upstream lifecycle-manager's metrics under its names, labels and values, beside this project's own, so that a
// team's alerts and dashboards written for it keep working (decision 027): per Kyma, one series per state, 1 for the
// state it is in and 0 for the others; per module the same, mandatory modules in their own family; and its requeue
// reasons. Read from the Kyma watch cache at scrape time, as the fleet gauges are: each replica exports the Kymas it
// owns, and a Kyma gone from the cache takes its series with it. Module names are bounded by the catalog: a module no
// catalog knows is reported as `(unknown)`. Its purge metrics come from the purge itself (reconcile/kyma/purge.ts).
import {
  ANNOTATIONS,
  isRecord,
  LABELS,
  type Kyma,
  type KymaModuleStatus,
  type ModuleState,
} from '@skr-watcher/api';
import { Counter, Gauge, registeredMetric, scrapeTimeGauge, type Registry } from '@skr-watcher/telemetry';
import { SkrFailure } from './reconcile/kyma/pass.js';
import { PURGE_ERRORS, type PurgeObserver } from './reconcile/kyma/purge.js';
import { isUnknownModule, UNKNOWN_MODULE_LABEL, worstState } from './reconcile/status.js';

/** Upstream's state sets (api/shared/state.go): a Kyma's, a module's (with Unmanaged), a mandatory module's. */
const KYMA_STATES = ['Ready', 'Processing', 'Error', 'Deleting', 'Warning'] as const;
const MODULE_STATES = [...KYMA_STATES, 'Unmanaged'] as const;
const MANDATORY_MODULE_STATES = KYMA_STATES;

/** Upstream's requeue reasons this agent has a counterpart for (its KymaRequeueReason values). */
export const REQUEUE_REASONS = {
  /** The SKR could not be reached, or its kubeconfig Secret is missing or broken. */
  skrUnavailable: 'sync_context_retrieval',
  /** A pass of a live Kyma failed otherwise (a KCP call). */
  processing: 'processing_kyma_state',
  /** A pass of a Kyma being deleted failed. */
  deletion: 'kyma_deletion',
} as const;

export interface LifecycleManagerSource {
  /** The Kymas in the watch cache (this replica's when sharded); undefined before the first list. */
  kymas(): Kyma[] | undefined;
  /** The ModuleReleaseMetas in the watch cache, as listed; they say which modules are mandatory. */
  releaseMetas(): readonly unknown[] | undefined;
}

export interface LifecycleManagerMetrics {
  /** A reconcile of `kyma` (as the cache holds it, if it does) failed with `error`: one requeue, by upstream's reason. */
  failed(kyma: Kyma | undefined, error: unknown): void;
}

/** Upstream's `shoot` label: the first DNS label of the `skr-domain` annotation, when it has more than two. */
function shootOf(kyma: Kyma): string {
  const parts = (kyma.metadata.annotations?.[ANNOTATIONS.skrDomain] ?? '').split('.');
  return parts.length > 2 ? parts[0]! : '';
}

function mandatoryNames(releaseMetas: readonly unknown[] | undefined): Set<string> {
  const names = new Set<string>();
  for (const meta of releaseMetas ?? []) {
    const spec = isRecord(meta) ? meta['spec'] : undefined;
    if (isRecord(spec) && isRecord(spec['mandatory']) && typeof spec['moduleName'] === 'string')
      names.add(spec['moduleName']);
  }
  return names;
}

/** The modules of a Kyma by label value: names no catalog knows fold into one `(unknown)` entry at their worst state. */
function modulesByLabel(modules: KymaModuleStatus[]): Map<string, ModuleState> {
  const byLabel = new Map<string, ModuleState>();
  for (const module of modules) {
    const label = isUnknownModule(module) ? UNKNOWN_MODULE_LABEL : module.name;
    const before = byLabel.get(label);
    byLabel.set(label, before === undefined ? module.state : worstState([before, module.state]));
  }
  return byLabel;
}

function causedBySkr(error: unknown): boolean {
  for (let cause = error; cause instanceof Error; cause = cause.cause) {
    if (cause instanceof SkrFailure) return true;
  }
  return false;
}

const sources = new WeakMap<Registry, LifecycleManagerSource>();

/** Upstream's per-Kyma labels: its name, shoot and instance id. */
function perKyma(kyma: Kyma) {
  return {
    kyma_name: kyma.metadata.name,
    shoot: shootOf(kyma),
    instance_id: kyma.metadata.labels?.[LABELS.instanceId] ?? '',
  };
}

/**
 * Upstream's purge metrics (its purge controller's): the duration of the last purge in seconds (upstream's help text
 * says "average", its code sets the last one), purges begun, and per Kyma and reason a 1 while its purge fails,
 * removed once a purge of it finishes.
 */
export function registerPurgeMetrics(registry: Registry): PurgeObserver {
  const time = registeredMetric(
    registry,
    'lifecycle_mgr_purgectrl_time',
    () =>
      new Gauge({
        name: 'lifecycle_mgr_purgectrl_time',
        help: 'Indicates average purge duration',
        registers: [registry],
      }),
  );
  const requests = registeredMetric(
    registry,
    'lifecycle_mgr_purgectrl_requests_total',
    () =>
      new Counter({
        name: 'lifecycle_mgr_purgectrl_requests_total',
        help: 'Indicates total purge count',
        registers: [registry],
      }),
  );
  const errors = registeredMetric(
    registry,
    'lifecycle_mgr_purgectrl_error',
    () =>
      new Gauge({
        name: 'lifecycle_mgr_purgectrl_error',
        help: 'Indicates purge errors',
        labelNames: ['kyma_name', 'shoot', 'instance_id', 'err_reason'],
        registers: [registry],
      }),
  );
  return {
    started: () => requests.inc(),
    finished(kyma, durationMs) {
      time.set(durationMs / 1000);
      for (const err_reason of Object.values(PURGE_ERRORS)) errors.remove({ ...perKyma(kyma), err_reason });
    },
    failed: (kyma, err_reason) => errors.set({ ...perKyma(kyma), err_reason }, 1),
  };
}

export function registerLifecycleManagerMetrics(
  registry: Registry,
  source: LifecycleManagerSource,
): LifecycleManagerMetrics {
  // A second registration on the same registry (a test, a new term of leadership) takes over the gauges.
  sources.set(registry, source);
  const current = () => sources.get(registry)!;

  scrapeTimeGauge(registry, {
    name: 'lifecycle_mgr_kyma_state',
    help: 'Indicates the Status.state for a given Kyma object',
    labelNames: ['kyma_name', 'state', 'shoot', 'instance_id'],
    collect() {
      const kymas = current().kymas();
      this.reset();
      for (const kyma of kymas ?? []) {
        const labels = perKyma(kyma);
        for (const state of KYMA_STATES) this.set({ ...labels, state }, kyma.status?.state === state ? 1 : 0);
      }
    },
  });
  scrapeTimeGauge(registry, {
    name: 'lifecycle_mgr_module_state',
    help: 'Indicates the Status.state for modules of Kyma',
    labelNames: ['module_name', 'kyma_name', 'state', 'shoot', 'instance_id'],
    collect() {
      const { kymas, releaseMetas } = current();
      this.reset();
      const mandatory = mandatoryNames(releaseMetas());
      for (const kyma of kymas() ?? []) {
        const labels = perKyma(kyma);
        for (const [module_name, moduleState] of modulesByLabel(kyma.status?.modules ?? [])) {
          if (mandatory.has(module_name)) continue;
          for (const state of MODULE_STATES)
            this.set({ ...labels, module_name, state }, moduleState === state ? 1 : 0);
        }
      }
    },
  });
  scrapeTimeGauge(registry, {
    name: 'lifecycle_mgr_mandatory_module_state',
    help: 'Indicates the Status.state for mandatory modules of Kyma',
    labelNames: ['module_name', 'kyma_name', 'state'],
    collect() {
      const { kymas, releaseMetas } = current();
      this.reset();
      const mandatory = mandatoryNames(releaseMetas());
      if (mandatory.size === 0) return;
      for (const kyma of kymas() ?? []) {
        for (const module of kyma.status?.modules ?? []) {
          if (!mandatory.has(module.name)) continue;
          for (const state of MANDATORY_MODULE_STATES)
            this.set(
              { module_name: module.name, kyma_name: kyma.metadata.name, state },
              module.state === state ? 1 : 0,
            );
        }
      }
    },
  });
  const requeues = registeredMetric(
    registry,
    'lifecycle_mgr_requeue_reason_total',
    () =>
      new Counter({
        name: 'lifecycle_mgr_requeue_reason_total',
        help: 'Indicates the requeue reason of the Kyma reconciler (upstream lifecycle-manager reasons).',
        labelNames: ['requeue_reason', 'requeue_type'],
        registers: [registry],
      }),
  );

  return {
    failed(kyma, error) {
      const reason = causedBySkr(error)
        ? REQUEUE_REASONS.skrUnavailable
        : kyma?.metadata.deletionTimestamp
          ? REQUEUE_REASONS.deletion
          : REQUEUE_REASONS.processing;
      requeues.inc({ requeue_reason: reason, requeue_type: 'unexpected' });
    },
  };
}
