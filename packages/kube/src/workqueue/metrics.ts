// The work queue's Prometheus metrics (shared by every queue of one registry; the `name` label tells them apart) and
// controller-runtime's stuck-worker gauges, read from the queues at scrape time.
import {
  Counter,
  Gauge,
  Histogram,
  registeredMetric,
  scrapeTimeGauge,
  type Registry,
} from '@skr-watcher/telemetry';

export interface QueueMetrics {
  depth: Gauge;
  adds: Counter;
  retries: Counter;
  failures: Counter;
  workDuration: Histogram;
  queueDuration: Histogram;
  inFlight: Gauge;
}

/** What the stuck-worker gauges read of a queue. */
export interface RunAges {
  readonly name: string;
  /** Seconds each run in flight has been going. */
  runAges(): number[];
}

/** The queues that report into one registry; the stuck-worker gauges ask each at scrape time. */
const queuesOf = new WeakMap<Registry, Set<RunAges>>();

/**
 * controller-runtime's stuck-worker gauges, read at scrape time: how long the longest run in flight has been going,
 * and the sum of every run in flight's age (grows without bound while a worker hangs). Queues of one name add up.
 * Returns what takes the queue out of them again (it stopped).
 */
export function registerStuckWorkerGauges(registry: Registry, queue: RunAges): () => void {
  let queues = queuesOf.get(registry);
  if (!queues) {
    queues = new Set();
    queuesOf.set(registry, queues);
  }
  queues.add(queue);
  const known = queues;
  const gauge = (name: string, help: string, value: (ages: number[]) => number) =>
    scrapeTimeGauge(registry, {
      name,
      help,
      labelNames: ['name'],
      collect() {
        this.reset();
        const ages = new Map<string, number[]>();
        for (const each of known) ages.set(each.name, [...(ages.get(each.name) ?? []), ...each.runAges()]);
        for (const [name, of] of ages) this.set({ name }, value(of));
      },
    });
  gauge(
    'workqueue_longest_running_processor_seconds',
    'How long the longest run in flight has been going.',
    (ages) => ages.reduce((max, age) => Math.max(max, age), 0),
  );
  gauge(
    'workqueue_unfinished_work_seconds',
    'Seconds of work in flight not yet observed by workqueue_work_duration_seconds; a large value means stuck runs.',
    (ages) => ages.reduce((sum, age) => sum + age, 0),
  );
  return () => {
    known.delete(queue);
  };
}

const WORK_BUCKETS_SECONDS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** The metrics in `registry`, registered by the first queue that asks; undefined without a registry. */
export function queueMetrics(registry: Registry | undefined): QueueMetrics | undefined {
  if (!registry) return undefined;
  // Several queues may share one registry: reuse a metric that is registered already.
  const existing = <M>(name: string, create: () => M): M => registeredMetric(registry, name, create);
  const registers = [registry];
  return {
    depth: existing(
      'workqueue_depth',
      () =>
        new Gauge({
          name: 'workqueue_depth',
          help: 'Keys waiting to be processed.',
          labelNames: ['name'],
          registers,
        }),
    ),
    adds: existing(
      'workqueue_adds_total',
      () =>
        new Counter({
          name: 'workqueue_adds_total',
          help: 'Adds of keys, coalesced or not.',
          labelNames: ['name'],
          registers,
        }),
    ),
    retries: existing(
      'workqueue_retries_total',
      () =>
        new Counter({
          name: 'workqueue_retries_total',
          help: 'Keys requeued with backoff after a failure.',
          labelNames: ['name'],
          registers,
        }),
    ),
    failures: existing(
      'workqueue_failures_total',
      () =>
        new Counter({
          name: 'workqueue_failures_total',
          help: 'Processing runs that failed.',
          labelNames: ['name'],
          registers,
        }),
    ),
    workDuration: existing(
      'workqueue_work_duration_seconds',
      () =>
        new Histogram({
          name: 'workqueue_work_duration_seconds',
          help: 'Time spent processing one key.',
          labelNames: ['name'],
          buckets: WORK_BUCKETS_SECONDS,
          registers,
        }),
    ),
    queueDuration: existing(
      'workqueue_queue_duration_seconds',
      () =>
        new Histogram({
          name: 'workqueue_queue_duration_seconds',
          help: 'Time a key waited in the queue before processing started.',
          labelNames: ['name'],
          buckets: WORK_BUCKETS_SECONDS,
          registers,
        }),
    ),
    inFlight: existing(
      'workqueue_in_flight',
      () =>
        new Gauge({
          name: 'workqueue_in_flight',
          help: 'Keys being processed now.',
          labelNames: ['name'],
          registers,
        }),
    ),
  };
}
