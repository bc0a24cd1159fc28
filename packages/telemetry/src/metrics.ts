import { Gauge, Registry, collectDefaultMetrics } from 'prom-client';

export { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** A registry of its own per component, with process metrics (RSS, CPU, event-loop lag). */
export function createRegistry(prefix = ''): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix });
  // prom-client reports `external` (which includes these); Buffers held by sockets and bodies show here alone.
  new Gauge({
    name: `${prefix}nodejs_array_buffers_bytes`,
    help: 'Memory of ArrayBuffers and Buffers (process.memoryUsage().arrayBuffers), part of external memory.',
    registers: [registry],
    collect() {
      this.set(process.memoryUsage().arrayBuffers);
    },
  });
  return registry;
}

/**
 * The metric registered under `name` in `registry`, or the one `create` registers there. Several instances of
 * one component (queues, informers, listeners, reconcilers) may share a registry, and prom-client refuses a
 * second registration of a name, so the first instance's metric is reused.
 */
export function registeredMetric<M>(registry: Registry, name: string, create: () => M): M {
  return (registry.getSingleMetric(name) as M | undefined) ?? create();
}

/** Buckets for request latencies, from 100 µs to 10 s. */
export const LATENCY_BUCKETS_SECONDS = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];

/**
 * A gauge computed at scrape time by `collect` (which sets its values), registered once per registry: the first
 * caller's `collect` serves every scrape, so it must read state that later callers update, not capture its own.
 */
export function scrapeTimeGauge(
  registry: Registry,
  options: {
    name: string;
    help: string;
    labelNames?: string[];
    collect: (this: Gauge) => void | Promise<void>;
  },
): Gauge {
  return registeredMetric(
    registry,
    options.name,
    () =>
      new Gauge({
        name: options.name,
        help: options.help,
        labelNames: options.labelNames ?? [],
        registers: [registry],
        collect: options.collect,
      }),
  );
}
