// Fleet state an SRE alerts on, counted at scrape time from the Kyma watch cache this replica already holds (no API
// call): Kymas by state, modules by name and state, Kymas whose webhook is silent or whose SKR is unreachable, and
// Kymas not reconciled for longer than their requeue. Labels are bounded (states, module names of the catalog);
// which Kyma it is goes to its status, Events and logs (decision 023). Sharded, each replica counts the Kymas it
// owns: sum() over replicas is the fleet.
import type { Kyma } from '@skr-watcher/api';
import { scrapeTimeGauge, type Registry } from '@skr-watcher/telemetry';
import { CONDITIONS, isUnknownModule, UNKNOWN_MODULE_LABEL } from './reconcile/status.js';

/** Every state a Kyma or module can report, so each series exists (at 0) before the first Kyma enters it. */
const KYMA_STATES = ['Ready', 'Processing', 'Warning', 'Error', 'Deleting', 'Unknown'] as const;

export interface FleetSource {
  /** The Kymas in the watch cache (this replica's when sharded); undefined before the first list. */
  kymas(): Kyma[] | undefined;
}

export interface FleetMetrics {
  /** A reconcile of `kymaKey` ended at `nowMs`; the next is due within `requeueAfterMs`. */
  reconciled(kymaKey: string, requeueAfterMs: number, nowMs?: number): void;
  /** Forget a Kyma (deleted, or handed to another replica). */
  forget(kymaKey: string): void;
}

function conditionFalse(kyma: Kyma, type: string): boolean {
  return (kyma.status?.conditions ?? []).some((c) => c.type === type && c.status === 'False');
}

function keyOf(kyma: Kyma): string {
  return `${kyma.metadata?.namespace ?? ''}/${kyma.metadata?.name ?? ''}`;
}

/** What the gauges of one registry read; a second controller on the same registry (a test, a new term) takes over. */
interface FleetState {
  source: FleetSource;
  now: () => number;
  grace: number;
  /** When each Kyma's next reconcile is due: the end of its last one plus its requeue. */
  due: Map<string, number>;
  /** A Kyma seen in the cache but never reconciled here is due one grace after it was first seen. */
  firstSeen: Map<string, number>;
}

const states = new WeakMap<Registry, FleetState>();

export function registerFleetMetrics(
  registry: Registry,
  fleetSource: FleetSource,
  options: { clock?: () => number; overdueGraceMs?: number } = {},
): FleetMetrics {
  const state: FleetState = {
    source: fleetSource,
    now: options.clock ?? Date.now,
    grace: options.overdueGraceMs ?? 60_000,
    due: new Map(),
    firstSeen: new Map(),
  };
  states.set(registry, state);
  const current = () => states.get(registry)!;
  const source = { kymas: () => current().source.kymas() };

  const byState = (kymas: Kyma[]) => {
    const counts = new Map<string, number>(KYMA_STATES.map((state) => [state, 0]));
    for (const kyma of kymas) {
      const state = kyma.status?.state ?? 'Unknown';
      counts.set(state, (counts.get(state) ?? 0) + 1);
    }
    return counts;
  };

  scrapeTimeGauge(registry, {
    name: 'skr_agent_kymas',
    help: 'Kymas this replica owns, by status.state (Ready, Processing, Warning, Error, Deleting; Unknown before the first status).',
    labelNames: ['state'],
    collect() {
      const kymas = source.kymas();
      this.reset();
      if (!kymas) return;
      for (const [state, count] of byState(kymas)) this.set({ state }, count);
    },
  });
  scrapeTimeGauge(registry, {
    name: 'skr_agent_modules',
    help: 'Modules of the Kymas this replica owns, by module name and state (status.modules[].state); names no catalog knows count under module="(unknown)".',
    labelNames: ['module', 'state'],
    collect() {
      const kymas = source.kymas();
      this.reset();
      if (!kymas) return;
      const counts = new Map<string, { module: string; state: string; count: number }>();
      for (const kyma of kymas) {
        for (const module of kyma.status?.modules ?? []) {
          const state = module.state ?? 'Unknown';
          // A user may list any name: only catalog modules become label values, so the series stay bounded.
          const name = isUnknownModule(module) ? UNKNOWN_MODULE_LABEL : module.name;
          const id = `${name}\0${state}`;
          const entry = counts.get(id) ?? { module: name, state, count: 0 };
          entry.count += 1;
          counts.set(id, entry);
        }
      }
      for (const { module, state, count } of counts.values()) this.set({ module, state }, count);
    },
  });
  const conditionGauge = (name: string, condition: string, help: string) =>
    scrapeTimeGauge(registry, {
      name,
      help,
      collect() {
        const kymas = source.kymas();
        this.reset();
        if (!kymas) return;
        this.set(kymas.filter((kyma) => conditionFalse(kyma, condition)).length);
      },
    });
  conditionGauge(
    'skr_agent_kymas_webhook_silent',
    CONDITIONS.skrWebhook,
    'Kymas this replica owns whose SKR webhook is silent or not installed (condition SKRWebhook False).',
  );
  conditionGauge(
    'skr_agent_kymas_skr_unreachable',
    CONDITIONS.skrConnected,
    'Kymas this replica owns whose SKR cannot be reached: kubeconfig Secret missing or broken, or the SKR not answering (condition SKRConnected False).',
  );
  scrapeTimeGauge(registry, {
    name: 'skr_agent_kymas_reconcile_overdue',
    help: 'Kymas this replica owns whose last reconcile ended longer ago than their requeue interval plus a minute (workers stuck or saturated).',
    collect() {
      const kymas = source.kymas();
      this.reset();
      if (!kymas) return;
      const { now, due, firstSeen, grace } = current();
      const at = now();
      const present = new Set<string>();
      let overdue = 0;
      for (const kyma of kymas) {
        const key = keyOf(kyma);
        present.add(key);
        let next = due.get(key);
        if (next === undefined) {
          if (!firstSeen.has(key)) firstSeen.set(key, at);
          next = firstSeen.get(key)!;
        }
        if (at > next + grace) overdue += 1;
      }
      for (const key of firstSeen.keys()) if (!present.has(key)) firstSeen.delete(key);
      for (const key of due.keys()) if (!present.has(key)) due.delete(key);
      this.set(overdue);
    },
  });

  return {
    reconciled(kymaKey, requeueAfterMs, nowMs = state.now()) {
      state.due.set(kymaKey, nowMs + requeueAfterMs);
      state.firstSeen.delete(kymaKey);
    },
    forget(kymaKey) {
      state.due.delete(kymaKey);
      state.firstSeen.delete(kymaKey);
    },
  };
}
