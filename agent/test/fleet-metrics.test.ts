// Fleet gauges (decision 023) read from Kymas as the watch cache holds them: counts by state, by module and state,
// by condition, and Kymas overdue for their requeue; label values never name a Kyma.
import { expect } from 'chai';
import type { Kyma } from '@skr-watcher/api';
import { createRegistry } from '@skr-watcher/telemetry';
import { registerFleetMetrics } from '../src/fleet-metrics.js';

const kyma = (
  name: string,
  state: string | undefined,
  conditions: Record<string, 'True' | 'False'> = {},
  modules: Record<string, string> = {},
): Kyma =>
  ({
    apiVersion: 'operator.kyma-project.io/v1beta2',
    kind: 'Kyma',
    metadata: { name, namespace: 'kcp-system' },
    spec: { channel: 'regular' },
    status: {
      ...(state ? { state } : {}),
      conditions: Object.entries(conditions).map(([type, status]) => ({
        type,
        status,
        reason: 'Test',
        message: '',
        lastTransitionTime: '2026-01-01T00:00:00Z',
      })),
      modules: Object.entries(modules).map(([module, moduleState]) => ({ name: module, state: moduleState })),
    },
  }) as unknown as Kyma;

describe('fleet metrics from the Kyma cache', () => {
  it('counts Kymas by state, modules by name and state, silent webhooks and unreachable SKRs', async () => {
    const registry = createRegistry();
    const kymas = [
      kyma(
        'a',
        'Ready',
        { SKRWebhook: 'True', SKRConnected: 'True' },
        { keda: 'Ready', serverless: 'Error' },
      ),
      kyma('b', 'Warning', { SKRWebhook: 'False', SKRConnected: 'True' }, { keda: 'Ready' }),
      kyma('c', 'Error', { SKRConnected: 'False' }, { serverless: 'Error' }),
      kyma('d', undefined),
    ];
    registerFleetMetrics(registry, { kymas: () => kymas });
    const text = await registry.metrics();
    expect(text).to.include('skr_agent_kymas{state="Ready"} 1');
    expect(text).to.include('skr_agent_kymas{state="Warning"} 1');
    expect(text).to.include('skr_agent_kymas{state="Error"} 1');
    expect(text).to.include('skr_agent_kymas{state="Processing"} 0');
    expect(text).to.include('skr_agent_kymas{state="Unknown"} 1');
    expect(text).to.include('skr_agent_modules{module="serverless",state="Error"} 2');
    expect(text).to.include('skr_agent_modules{module="keda",state="Ready"} 2');
    expect(text).to.include('skr_agent_kymas_webhook_silent 1');
    expect(text).to.include('skr_agent_kymas_skr_unreachable 1');
    // No Kyma name appears as a label value.
    expect(text).not.to.match(/="[abcd]"/);
  });

  it('counts a Kyma overdue once its requeue plus the grace has passed without a reconcile', async () => {
    const registry = createRegistry();
    let now = 1_000_000;
    const fleet = registerFleetMetrics(
      registry,
      { kymas: () => [kyma('a', 'Ready'), kyma('b', 'Ready')] },
      { clock: () => now, overdueGraceMs: 1_000 },
    );
    const overdue = async () =>
      Number(/skr_agent_kymas_reconcile_overdue (\d+)/.exec(await registry.metrics())?.[1]);
    expect(await overdue()).to.equal(0);
    fleet.reconciled('kcp-system/a', 10_000, now);
    now += 5_000;
    // b was never reconciled: due one grace after it was first seen.
    expect(await overdue()).to.equal(1);
    now += 7_000;
    expect(await overdue()).to.equal(2);
    fleet.reconciled('kcp-system/a', 10_000, now);
    fleet.reconciled('kcp-system/b', 10_000, now);
    expect(await overdue()).to.equal(0);
  });

  it('exports nothing before the cache has listed', async () => {
    const registry = createRegistry();
    registerFleetMetrics(registry, { kymas: () => undefined });
    const text = await registry.metrics();
    expect(text).not.to.match(/^skr_agent_kymas\{/m);
  });
});
