// What an SRE watches of the ring (decision 023): Kymas handed to peers, Kymas taken over from a replica that is
// gone, peers' expired Leases fenced, and how long a takeover took from the moment this replica found the former
// owner gone (its Lease released or fenced) to the owner label written. Labels: none (one series each per replica).
import { Counter, Histogram, registeredMetric, type Registry } from '@skr-watcher/telemetry';

export interface ShardMetrics {
  handover(): void;
  takeover(seconds: number): void;
  fencing(): void;
}

const TAKEOVER_BUCKETS_SECONDS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 45, 60, 90, 120, 300];

export function shardMetrics(registry: Registry | undefined): ShardMetrics | undefined {
  if (!registry) return undefined;
  const registers = [registry];
  const counter = (name: string, help: string) =>
    registeredMetric(registry, name, () => new Counter({ name, help, registers }));
  const handovers = counter(
    'skr_agent_shard_handovers_total',
    'Kymas this replica handed to a peer (the ring moved them: a peer joined, or this replica is leaving).',
  );
  const takeovers = counter(
    'skr_agent_shard_takeovers_total',
    'Kymas this replica claimed from an owner that is gone (its Lease released or fenced).',
  );
  const fencings = counter(
    'skr_agent_shard_fencings_total',
    "Peers' expired Leases this replica fenced (the peer stopped renewing: crashed, hung or partitioned).",
  );
  const duration = registeredMetric(
    registry,
    'skr_agent_shard_takeover_duration_seconds',
    () =>
      new Histogram({
        name: 'skr_agent_shard_takeover_duration_seconds',
        help: 'From this replica finding the former owner gone to the owner label naming this replica, per Kyma taken over.',
        buckets: TAKEOVER_BUCKETS_SECONDS,
        registers,
      }),
  );
  return {
    handover: () => handovers.inc(),
    takeover(seconds) {
      takeovers.inc();
      duration.observe(seconds);
    },
    fencing: () => fencings.inc(),
  };
}
