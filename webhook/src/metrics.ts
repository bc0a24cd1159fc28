// Prometheus instruments of the webhook; label values are bounded (codes, reasons, outcomes).
import { Counter, Gauge, Histogram, LATENCY_BUCKETS_SECONDS, type Registry } from '@skr-watcher/telemetry';
import { DROP_REASONS, type DispatchObserver, type DropReason } from './dispatch/observer.js';
import type { DeliveryOutcome } from './dispatch/outcome.js';
import type { DriftVerdict } from './drift.js';

/** Why an admission request was not answered with a review. */
export const ADMISSION_ERRORS = [
  'not_found',
  'method_not_allowed',
  'too_large',
  'over_budget',
  'bad_json',
  'invalid_review',
] as const;
export type AdmissionError = (typeof ADMISSION_ERRORS)[number];

/** Results of a certificate reload from disk. */
export const TLS_RELOAD_RESULTS = ['applied', 'failed'] as const;
export type TlsReloadResult = (typeof TLS_RELOAD_RESULTS)[number];

export interface AdmissionMetrics {
  /** Called once per answered request. */
  answered(code: number, seconds: number): void;
  error(reason: AdmissionError): void;
  /** A connection over the cap was closed on accept. */
  connectionRefused(): void;
  /** A write of an object a module installed was reviewed (drift.ts): what it was. */
  drift(verdict: DriftVerdict): void;
}

export interface WebhookMetrics {
  admission: AdmissionMetrics;
  dispatch: DispatchObserver;
  /**
   * Called before a scrape reads the dispatch metrics: the dispatch thread reports on its own every second, and
   * this brings its latest counts over first, so `/metrics` is exact.
   */
  refreshDispatchBeforeScrape(refresh: () => Promise<unknown>): void;
  tlsReloaded(result: TlsReloadResult): void;
}

export function createWebhookMetrics(registry: Registry): WebhookMetrics {
  let refresh: (() => Promise<unknown>) | undefined;
  // One refresh serves every dispatch metric of a scrape.
  let refreshing: Promise<unknown> | undefined;
  const collect = async () => {
    if (!refresh) return;
    refreshing ??= refresh().finally(() => (refreshing = undefined));
    await refreshing;
  };
  const requests = new Counter({
    name: 'skr_webhook_admission_requests_total',
    help: 'Admission requests answered, by HTTP status code.',
    labelNames: ['code'],
    registers: [registry],
  });
  const errors = new Counter({
    name: 'skr_webhook_admission_errors_total',
    help: 'Admission requests refused before review, by reason.',
    labelNames: ['reason'],
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'skr_webhook_admission_duration_seconds',
    help: 'Time from request start to the answer being written.',
    buckets: LATENCY_BUCKETS_SECONDS,
    registers: [registry],
  });
  const enqueued = new Counter({
    name: 'skr_webhook_events_enqueued_total',
    help: 'Relevant changes that created a new queue entry.',
    registers: [registry],
    collect,
  });
  const coalesced = new Counter({
    name: 'skr_webhook_events_coalesced_total',
    help: 'Relevant changes merged into an entry already queued for the same object.',
    registers: [registry],
    collect,
  });
  const delivered = new Counter({
    name: 'skr_webhook_events_delivered_total',
    help: 'Events KCP answered with 2xx.',
    registers: [registry],
    collect,
  });
  const dropped = new Counter({
    name: 'skr_webhook_events_dropped_total',
    help: 'Events given up, by reason (queue_full, max_age, rejected, shutdown, invalid).',
    labelNames: ['reason'],
    registers: [registry],
    collect,
  });
  const depth = new Gauge({
    name: 'skr_webhook_queue_depth',
    help: 'Objects with an undelivered event (waiting, in flight or backing off).',
    registers: [registry],
    collect,
  });
  const callback = new Histogram({
    name: 'skr_webhook_callback_duration_seconds',
    help: 'Duration of callback attempts to KCP, by outcome (delivered, retry, rejected).',
    labelNames: ['outcome'],
    buckets: LATENCY_BUCKETS_SECONDS,
    registers: [registry],
    collect,
  });
  const breakerOpen = new Gauge({
    name: 'skr_webhook_kcp_breaker_open',
    help: '1 while KCP cannot be reached and callbacks wait for one probe at a time, else 0.',
    registers: [registry],
    collect,
  });
  breakerOpen.set(0);
  const schedIdle = new Gauge({
    name: 'skr_webhook_dispatch_thread_sched_idle',
    help:
      '1 while the thread that sends callbacks runs under SCHED_IDLE (admission answers always take the core ' +
      'first), 0 when only its nice value ranks it below them.',
    registers: [registry],
  });
  schedIdle.set(0);
  const refused = new Counter({
    name: 'skr_webhook_connections_refused_total',
    help: 'Connections closed on accept because the webhook already held its maximum.',
    registers: [registry],
  });
  const reloads = new Counter({
    name: 'skr_webhook_tls_reloads_total',
    help: 'Certificate reloads from disk, by result.',
    labelNames: ['result'],
    registers: [registry],
  });

  const driftReviews = new Counter({
    name: 'skr_webhook_drift_reviews_total',
    help: 'Writes of objects a module installed, by verdict (drift: sent to KCP; own_write: the agent; churn: nothing to put back).',
    labelNames: ['verdict'],
    registers: [registry],
  });
  const driftBy = {
    drift: driftReviews.labels('drift'),
    'own-write': driftReviews.labels('own_write'),
    churn: driftReviews.labels('churn'),
  } satisfies Record<DriftVerdict, Counter.Internal>;
  for (const child of Object.values(driftBy)) child.inc(0);

  // Children bound once: the hot path does no label lookups.
  const byCode = new Map<number, Counter.Internal>();
  const codeChild = (code: number) => {
    let child = byCode.get(code);
    if (!child) {
      child = requests.labels(String(code));
      byCode.set(code, child);
    }
    return child;
  };
  for (const code of [200, 400, 404, 405, 413, 503]) codeChild(code).inc(0);
  // Every known label value at 0 from the start: a series that appears only with its first increment hides that
  // increment from rate() and increase(), and leaves its dashboard panel empty until then.
  const errorBy = new Map<AdmissionError, Counter.Internal>();
  for (const reason of ADMISSION_ERRORS) {
    const child = errors.labels(reason);
    child.inc(0);
    errorBy.set(reason, child);
  }
  const reloadBy = new Map<TlsReloadResult, Counter.Internal>();
  for (const result of TLS_RELOAD_RESULTS) {
    const child = reloads.labels(result);
    child.inc(0);
    reloadBy.set(result, child);
  }
  const droppedBy = new Map<DropReason, Counter.Internal>();
  for (const reason of DROP_REASONS) {
    const child = dropped.labels(reason);
    child.inc(0);
    droppedBy.set(reason, child);
  }
  const callbackBy = {
    delivered: callback.labels('delivered'),
    retry: callback.labels('retry'),
    rejected: callback.labels('rejected'),
  } satisfies Record<DeliveryOutcome['result'], Histogram.Internal<string>>;

  return {
    admission: {
      answered(code, seconds) {
        codeChild(code).inc();
        duration.observe(seconds);
      },
      error(reason) {
        errorBy.get(reason)?.inc();
      },
      connectionRefused: () => refused.inc(),
      drift: (verdict) => driftBy[verdict].inc(),
    },
    dispatch: {
      enqueued: (count = 1) => enqueued.inc(count),
      coalesced: (count = 1) => coalesced.inc(count),
      delivered: (count = 1) => delivered.inc(count),
      dropped: (reason, count = 1) => droppedBy.get(reason)?.inc(count),
      depth: (entries) => depth.set(entries),
      attempt: (outcome, seconds) => callbackBy[outcome].observe(seconds),
      breaker: (open) => breakerOpen.set(open ? 1 : 0),
      threadScheduling: (policy) => schedIdle.set(policy === 'idle' ? 1 : 0),
    },
    tlsReloaded: (result) => reloadBy.get(result)?.inc(),
    refreshDispatchBeforeScrape: (next) => {
      refresh = next;
    },
  };
}
