// Leader election on a coordination.k8s.io/v1 Lease, with client-go's timing and semantics:
// a candidate takes a Lease whose holder has not renewed within the lease duration (as observed on
// the candidate's own clock), the leader renews every retry period and steps down when it could not
// renew within the renew deadline, and a leader that stops releases the Lease so a standby takes over at once.
import {
  ApiException,
  CoordinationV1Api,
  V1MicroTime,
  type KubeConfig,
  type V1Lease,
} from '@kubernetes/client-node';
import { jittered, systemClock, type Clock } from '@skr-watcher/api';
import { Gauge, registeredMetric, type Logger, type Registry } from '@skr-watcher/telemetry';

export const LEADER_ELECTION_DEFAULTS = {
  /** How long a Lease is valid after its last renewal; a standby waits this long after the leader went silent. */
  leaseDurationMs: 15_000,
  /** The leader steps down when it has not renewed for this long (must be below the lease duration). */
  renewDeadlineMs: 10_000,
  /** Interval between acquire and renew attempts. */
  retryPeriodMs: 2_000,
} as const;

export interface LeaderElectorOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  name: string;
  /** Unique per replica, e.g. `<pod name>_<random>`; it appears in the Lease's holderIdentity. */
  identity: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /** Called once when this replica becomes the leader; `signal` aborts when it stops leading. */
  onStartedLeading: (signal: AbortSignal) => void | Promise<void>;
  /** Called once when a replica that was leading stops leading (lost, or released on stop). */
  onStoppedLeading?: (reason: 'lost' | 'released') => void;
  /** Called when the observed leader changes (including to this replica). */
  onNewLeader?: (identity: string) => void;
  clock?: Clock;
  logger?: Logger;
  registry?: Registry;
}

export interface LeaderElector {
  readonly isLeader: boolean;
  /** Runs until stop(): acquires, then renews while leading; after losing the lease it does not run again. */
  run(): Promise<void>;
  /** Stops trying; a leader releases the Lease first so a standby can take over without waiting. */
  stop(): Promise<void>;
}

interface ObservedRecord {
  holder: string;
  leaseDurationMs: number;
  renewTime: string;
  resourceVersion: string;
  /** Our clock when we last saw the record change; expiry is judged from this, never from the holder's clock. */
  observedAt: number;
}

function microTime(ms: number): V1MicroTime {
  return new V1MicroTime(ms);
}

/** The Lease timestamps come back as strings (or Date); they are only compared for change. */
function timeText(value: unknown): string {
  if (value instanceof Date) return value.toISOString();
  return typeof value === 'string' ? value : '';
}

export function createLeaderElector(options: LeaderElectorOptions): LeaderElector {
  const leaseDurationMs = options.leaseDurationMs ?? LEADER_ELECTION_DEFAULTS.leaseDurationMs;
  const renewDeadlineMs = options.renewDeadlineMs ?? LEADER_ELECTION_DEFAULTS.renewDeadlineMs;
  const retryPeriodMs = options.retryPeriodMs ?? LEADER_ELECTION_DEFAULTS.retryPeriodMs;
  if (!(renewDeadlineMs < leaseDurationMs)) {
    throw new Error(
      `renew deadline (${renewDeadlineMs} ms) must be shorter than the lease duration (${leaseDurationMs} ms)`,
    );
  }
  if (!(retryPeriodMs < renewDeadlineMs)) {
    throw new Error(
      `retry period (${retryPeriodMs} ms) must be shorter than the renew deadline (${renewDeadlineMs} ms)`,
    );
  }
  const { namespace, name, identity } = options;
  // Timers that keep the process alive: a replica runs for its Lease until stopped (the work queue's clock does
  // not, and with it a process holding nothing else exited right after taking the Lease and never renewed).
  const clock = options.clock ?? systemClock;
  const logger = options.logger?.child({ lease: `${namespace}/${name}`, identity });
  const api = options.kubeConfig.makeApiClient(CoordinationV1Api);
  const registry = options.registry;
  const leaderGauge = registry
    ? registeredMetric(
        registry,
        'leader_election_is_leader',
        () =>
          new Gauge({
            name: 'leader_election_is_leader',
            help: '1 while this replica holds the Lease.',
            labelNames: ['lease'],
            registers: [registry],
          }),
      )
    : undefined;

  let observed: ObservedRecord | undefined;
  /** This elector wrote the current holder record itself; a Lease naming our identity is not proof of that. */
  let tookLease = false;
  let leading = false;
  let stopped = false;
  let leadership: AbortController | undefined;
  let lastRenewAt = 0;
  let wake: (() => void) | undefined;
  let running: Promise<void> | undefined;

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = clock.setTimeout(() => {
        wake = undefined;
        resolve();
      }, ms);
      wake = () => {
        clock.clearTimeout(timer);
        wake = undefined;
        resolve();
      };
    });
  const withDeadline = (pending: Promise<boolean>, ms: number) =>
    new Promise<boolean>((resolve) => {
      const timer = clock.setTimeout(() => resolve(false), ms);
      void pending.then((ok) => {
        clock.clearTimeout(timer);
        resolve(ok);
      });
    });

  const observe = (lease: V1Lease) => {
    const holder = lease.spec?.holderIdentity ?? '';
    const renewTime = timeText(lease.spec?.renewTime);
    const resourceVersion = lease.metadata?.resourceVersion ?? '';
    const durationMs = (lease.spec?.leaseDurationSeconds ?? leaseDurationMs / 1000) * 1000;
    if (!observed || observed.holder !== holder || observed.renewTime !== renewTime) {
      if (observed?.holder !== holder && holder) options.onNewLeader?.(holder);
      observed = { holder, renewTime, resourceVersion, leaseDurationMs: durationMs, observedAt: clock.now() };
    } else {
      observed.resourceVersion = resourceVersion;
    }
  };

  const leaseSpec = (acquireTime: V1MicroTime | Date | undefined, transitions: number) => ({
    holderIdentity: identity,
    leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000),
    acquireTime: acquireTime ?? microTime(Date.now()),
    renewTime: microTime(Date.now()),
    leaseTransitions: transitions,
  });

  /** One attempt to take or keep the Lease; true when this replica holds it afterwards. */
  const tryAcquireOrRenew = async (): Promise<boolean> => {
    let lease: V1Lease;
    try {
      lease = await api.readNamespacedLease({ name, namespace });
    } catch (error) {
      if (!(error instanceof ApiException) || error.code !== 404) throw error;
      const created = await api.createNamespacedLease({
        namespace,
        body: {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name, namespace },
          spec: leaseSpec(undefined, 0),
        },
      });
      observe(created);
      tookLease = true;
      return true;
    }
    observe(lease);
    const current = observed as ObservedRecord;
    // A live Lease under our identity that this elector never took belongs to another replica started with
    // the same identity: treat it as foreign, or both would renew it and both would lead.
    const heldByOther = current.holder !== '' && (current.holder !== identity || !tookLease);
    if (heldByOther && current.observedAt + current.leaseDurationMs > clock.now()) return false;

    const spec = lease.spec ?? {};
    const taking = spec.holderIdentity !== identity;
    const transitions = (spec.leaseTransitions ?? 0) + (taking && current.holder !== '' ? 1 : 0);
    // acquireTime is kept while we renew; a JS Date would serialize with milliseconds and be rejected.
    const acquireTime =
      taking || !spec.acquireTime ? undefined : microTime(new Date(spec.acquireTime).getTime());
    // replace carries metadata.resourceVersion: if anyone wrote the Lease since our read, this is a 409.
    const updated = await api.replaceNamespacedLease({
      name,
      namespace,
      body: { ...lease, spec: { ...spec, ...leaseSpec(acquireTime, transitions) } },
    });
    observe(updated);
    tookLease = true;
    return true;
  };

  const attempt = async (): Promise<boolean> => {
    try {
      return await tryAcquireOrRenew();
    } catch (error) {
      if (error instanceof ApiException && error.code === 409) {
        logger?.debug('Lease changed under us (409); will retry');
      } else {
        logger?.warn({ err: error }, 'Lease request failed');
      }
      return false;
    }
  };

  const startLeading = () => {
    leading = true;
    leadership = new AbortController();
    leaderGauge?.set({ lease: `${namespace}/${name}` }, 1);
    logger?.info('became leader');
    const signal = leadership.signal;
    Promise.resolve()
      .then(() => options.onStartedLeading(signal))
      .catch((error: unknown) => logger?.error({ err: error }, 'onStartedLeading failed'));
  };

  const stopLeading = (reason: 'lost' | 'released') => {
    tookLease = false;
    if (!leading) return;
    leading = false;
    leaderGauge?.set({ lease: `${namespace}/${name}` }, 0);
    leadership?.abort(new Error(`leadership ${reason}`));
    if (reason === 'lost') logger?.error('lost the Lease; stopping');
    else logger?.info('released the Lease');
    options.onStoppedLeading?.(reason);
  };

  const release = async () => {
    try {
      const lease = await api.readNamespacedLease({ name, namespace });
      if (lease.spec?.holderIdentity !== identity) return;
      // An empty holder with a 1 s duration tells standbys the Lease is free now.
      await api.replaceNamespacedLease({
        name,
        namespace,
        body: {
          ...lease,
          spec: {
            ...lease.spec,
            holderIdentity: undefined,
            leaseDurationSeconds: 1,
            acquireTime: microTime(Date.now()),
            renewTime: microTime(Date.now()),
          },
        },
      });
    } catch (error) {
      logger?.warn({ err: error }, 'could not release the Lease; standbys take over when it expires');
    }
  };

  const loop = async () => {
    // Acquire.
    while (!stopped) {
      if (await attempt()) {
        lastRenewAt = clock.now();
        break;
      }
      await sleep(jittered(retryPeriodMs, 0.2));
    }
    if (stopped) return;
    startLeading();
    // Renew until stopped, or until renewals failed for longer than the renew deadline.
    while (!stopped) {
      await sleep(retryPeriodMs);
      if (stopped) break;
      // A renewal that hangs past the deadline counts as failed: the Lease may have expired meanwhile.
      const remainingMs = Math.max(0, renewDeadlineMs - (clock.now() - lastRenewAt));
      if (await withDeadline(attempt(), remainingMs)) {
        lastRenewAt = clock.now();
        continue;
      }
      if (clock.now() - lastRenewAt >= renewDeadlineMs || (observed && observed.holder !== identity)) {
        stopLeading('lost');
        return;
      }
    }
  };

  return {
    get isLeader() {
      return leading;
    },
    run() {
      running ??= loop();
      return running;
    },
    async stop() {
      stopped = true;
      wake?.();
      await running;
      if (leading) {
        await release();
        stopLeading('released');
      }
    },
  };
}
