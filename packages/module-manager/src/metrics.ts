// Prometheus metrics of a module manager; labels are the manager's name and fixed words, never object names.
import {
  Counter,
  Histogram,
  LATENCY_BUCKETS_SECONDS,
  registeredMetric,
  type Registry,
} from '@skr-watcher/telemetry';

export interface ManagerMetrics {
  reconciles: Counter<'manager' | 'outcome'>;
  writes: Counter<'manager' | 'operation'>;
  statusWrites: Counter<'manager' | 'status'>;
  duration: Histogram<'manager'>;
  connections: Counter<'manager' | 'resumed'>;
}

export function managerMetrics(registry: Registry): ManagerMetrics {
  const registers = [registry];
  return {
    reconciles: registeredMetric(
      registry,
      'module_manager_reconciles_total',
      () =>
        new Counter({
          name: 'module_manager_reconciles_total',
          help: 'ModuleConfigs reconciled, by outcome (applied, unchanged, deleted, render_failed, error).',
          labelNames: ['manager', 'outcome'],
          registers,
        }),
    ),
    writes: registeredMetric(
      registry,
      'module_manager_syncresource_writes_total',
      () =>
        new Counter({
          name: 'module_manager_syncresource_writes_total',
          help: 'SyncResource writes, by operation (apply, delete). Unchanged renders write nothing.',
          labelNames: ['manager', 'operation'],
          registers,
        }),
    ),
    statusWrites: registeredMetric(
      registry,
      'module_manager_condition_writes_total',
      () =>
        new Counter({
          name: 'module_manager_condition_writes_total',
          help: "Writes of the manager's condition on ModuleConfigs, by the condition's status.",
          labelNames: ['manager', 'status'],
          registers,
        }),
    ),
    duration: registeredMetric(
      registry,
      'module_manager_reconcile_duration_seconds',
      () =>
        new Histogram({
          name: 'module_manager_reconcile_duration_seconds',
          help: 'Time to reconcile one ModuleConfig (render, SyncResource and condition writes).',
          labelNames: ['manager'],
          buckets: LATENCY_BUCKETS_SECONDS,
          registers,
        }),
    ),
    connections: registeredMetric(
      registry,
      'module_manager_kube_tls_connections_total',
      () =>
        new Counter({
          name: 'module_manager_kube_tls_connections_total',
          help: 'TLS connections to the KCP API server, by whether the handshake resumed a session; steady while connections are kept.',
          labelNames: ['manager', 'resumed'],
          registers,
        }),
    ),
  };
}
