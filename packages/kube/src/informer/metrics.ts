// The informer's Prometheus metrics, shared by every informer of one registry (the `resource` label tells them apart).
import { Counter, Gauge, registeredMetric, type Registry } from '@skr-watcher/telemetry';

export interface InformerMetrics {
  restarts: Counter;
  relists: Counter;
  resyncs: Counter;
  events: Counter;
  objects: Gauge;
}

/** The metrics in `registry`, registered by the first informer that asks; undefined without a registry. */
export function informerMetrics(registry: Registry | undefined): InformerMetrics | undefined {
  if (!registry) return undefined;
  const registers = [registry];
  const existing = <M>(name: string, create: () => M): M => registeredMetric(registry, name, create);
  return {
    restarts: existing(
      'informer_watch_restarts_total',
      () =>
        new Counter({
          name: 'informer_watch_restarts_total',
          help: 'Watches restarted, by reason (closed, timeout, gone, watchdog, error).',
          labelNames: ['resource', 'reason'],
          registers,
        }),
    ),
    relists: existing(
      'informer_relists_total',
      () =>
        new Counter({
          name: 'informer_relists_total',
          help: 'Full lists of the resource.',
          labelNames: ['resource'],
          registers,
        }),
    ),
    resyncs: existing(
      'informer_resyncs_total',
      () =>
        new Counter({
          name: 'informer_resyncs_total',
          help: 'Resyncs from the cache: every cached object reported to onUpdate again, without a list.',
          labelNames: ['resource'],
          registers,
        }),
    ),
    events: existing(
      'informer_watch_events_total',
      () =>
        new Counter({
          name: 'informer_watch_events_total',
          help: 'Watch events received, by type.',
          labelNames: ['resource', 'type'],
          registers,
        }),
    ),
    objects: existing(
      'informer_objects',
      () =>
        new Gauge({
          name: 'informer_objects',
          help: 'Objects in the informer cache.',
          labelNames: ['resource'],
          registers,
        }),
    ),
  };
}
