// The metrics of Kyma passes: how many by result, and how long each took.
import {
  Counter,
  Histogram,
  LATENCY_BUCKETS_SECONDS,
  registeredMetric,
  type Registry,
} from '@skr-watcher/telemetry';

export interface PassMetrics {
  /** One pass ended with `result` (ready, processing, warning, error, deleting, paused, absent, failed). */
  observe(result: string, seconds: number): void;
}

export function passMetricsIn(registry: Registry | undefined): PassMetrics | undefined {
  if (!registry) return undefined;
  const registers = [registry];
  const total = registeredMetric(
    registry,
    'skr_agent_reconcile_total',
    () =>
      new Counter({
        name: 'skr_agent_reconcile_total',
        help: 'Kyma reconciles by result (ready, processing, warning, error, deleting, paused, absent, failed).',
        labelNames: ['result'],
        registers,
      }),
  );
  const duration = registeredMetric(
    registry,
    'skr_agent_reconcile_duration_seconds',
    () =>
      new Histogram({
        name: 'skr_agent_reconcile_duration_seconds',
        help: 'Duration of one Kyma reconcile, by result.',
        labelNames: ['result'],
        buckets: LATENCY_BUCKETS_SECONDS,
        registers,
      }),
  );
  return {
    observe(result, seconds) {
      total.inc({ result });
      duration.observe({ result }, seconds);
    },
  };
}
