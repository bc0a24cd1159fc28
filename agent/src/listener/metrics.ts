// Prometheus metrics of the listener; labels are bounded (status code, contract), never an identity.
import {
  Counter,
  Gauge,
  Histogram,
  LATENCY_BUCKETS_SECONDS,
  registeredMetric,
  type Registry,
} from '@skr-watcher/telemetry';

export interface ListenerMetrics {
  requests: Counter<'code'>;
  duration: Histogram<'code'>;
  accepted: Counter<'contract'>;
  enqueued: Counter;
  connections: Gauge;
  connectionsRefused: Counter;
  tlsUpdates: Counter;
}

/** Registers the metrics, or reuses them when another listener registered them in the same registry. */
export function listenerMetrics(registry: Registry): ListenerMetrics {
  const registers = [registry];
  const reuse = <M>(name: string, create: () => M): M => registeredMetric(registry, name, create);
  return {
    requests: reuse(
      'skr_listener_requests_total',
      () =>
        new Counter({
          name: 'skr_listener_requests_total',
          help: 'Callback requests answered by the listener, by HTTP status code.',
          labelNames: ['code'],
          registers,
        }),
    ),
    duration: reuse(
      'skr_listener_request_duration_seconds',
      () =>
        new Histogram({
          name: 'skr_listener_request_duration_seconds',
          help: 'Time from request start to the end of the answer, by HTTP status code.',
          labelNames: ['code'],
          buckets: LATENCY_BUCKETS_SECONDS,
          registers,
        }),
    ),
    accepted: reuse(
      'skr_listener_events_accepted_total',
      () =>
        new Counter({
          name: 'skr_listener_events_accepted_total',
          help: 'Callback events accepted (answered 200), by contract version.',
          labelNames: ['contract'],
          registers,
        }),
    ),
    enqueued: reuse(
      'skr_listener_enqueued_total',
      () =>
        new Counter({
          name: 'skr_listener_enqueued_total',
          help: 'Kyma keys handed to the reconcile queue; below accepted events when the coalescing window merges them.',
          registers,
        }),
    ),
    connections: reuse(
      'skr_listener_open_connections',
      () =>
        new Gauge({
          name: 'skr_listener_open_connections',
          help: 'Connections open to the listener now.',
          registers,
        }),
    ),
    connectionsRefused: reuse(
      'skr_listener_connections_refused_total',
      () =>
        new Counter({
          name: 'skr_listener_connections_refused_total',
          help: 'Connections closed on accept because the listener already held its maximum.',
          registers,
        }),
    ),
    tlsUpdates: reuse(
      'skr_listener_tls_updates_total',
      () =>
        new Counter({
          name: 'skr_listener_tls_updates_total',
          help: 'Times the serving certificate or CA bundle was swapped without a restart.',
          registers,
        }),
    ),
  };
}
