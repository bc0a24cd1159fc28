// The metrics of the targeted paths: Module CR mirrors by outcome and the SKR reads each needed, SyncResource
// applies by outcome.
import { Counter, Histogram, registeredMetric, type Registry } from '@skr-watcher/telemetry';

export interface TargetedMetrics {
  syncApplies: Counter<'outcome'>;
  mirrors: Counter<'outcome'>;
  mirrorReads: Histogram;
}

export function targetedMetricsIn(registry: Registry | undefined): TargetedMetrics | undefined {
  if (!registry) return undefined;
  const registers = [registry];
  return {
    syncApplies: registeredMetric(
      registry,
      'skr_agent_sync_resource_applies_total',
      () =>
        new Counter({
          name: 'skr_agent_sync_resource_applies_total',
          help: 'SyncResource changes applied on the targeted path, by outcome (applied, skipped, failed).',
          labelNames: ['outcome'],
          registers,
        }),
    ),
    mirrors: registeredMetric(
      registry,
      'skr_agent_module_mirrors_total',
      () =>
        new Counter({
          name: 'skr_agent_module_mirrors_total',
          help: 'Module CR callbacks mirrored on the targeted path, by outcome (mirrored, unchanged, not-a-module, absent, not-shown).',
          labelNames: ['outcome'],
          registers,
        }),
    ),
    mirrorReads: registeredMetric(
      registry,
      'skr_agent_module_mirror_reads',
      () =>
        new Histogram({
          name: 'skr_agent_module_mirror_reads',
          help: 'SKR reads per callback on the targeted path: 1 when the write had landed at the first read, more when not yet.',
          // Whole reads: le="1" counts callbacks that needed no re-read, le="2" at most one.
          buckets: [1, 2, 3, 5, 10, 20, 50],
          registers,
        }),
    ),
  };
}
