// Upstream lifecycle-manager's metrics beside this project's (decision 027): its names, labels and values (1 for the
// state a Kyma or module is in, 0 for the others), mandatory modules in their own family, module names bounded by the
// catalog, and its requeue reasons; then the skr-agent process on real planes, scraped at /metrics, exporting them
// for the module it installed.
import { expect } from 'chai';
import { CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { ANNOTATIONS, GROUP, KINDS, LABELS, type Kyma } from '@skr-watcher/api';
import { freePort, startEnvironment, type Environment } from '@skr-watcher/testenv';
import { createRegistry } from '@skr-watcher/telemetry';
import { waitUntil } from '../../test/support/eventually.js';
import { seedKcp } from '../../test/support/kcp-seed.js';
import { parseMetrics, type Samples } from '../../test/support/prometheus-text.js';
import { registerLifecycleManagerMetrics } from '../src/lifecycle-manager-metrics.js';
import { SkrFailure } from '../src/reconcile/kyma/pass.js';
import { runAgent, type AgentChild } from './support/agent-child.js';

const kyma = (name: string, state: string | undefined, modules: Record<string, string>, extra = {}): Kyma =>
  ({
    apiVersion: `${GROUP}/v1beta2`,
    kind: 'Kyma',
    metadata: { name, namespace: 'kcp-system', ...extra },
    spec: { channel: 'regular' },
    status: {
      ...(state ? { state } : {}),
      modules: Object.entries(modules).map(([module, moduleState]) => ({
        name: module,
        state: moduleState,
        // A module no catalog knows is reported so by resolution.
        ...(module.startsWith('typo') ? { message: 'ModuleReleaseMetaNotFound: no such module' } : {}),
        ...(module.startsWith('typo') ? {} : { version: '1.0.0' }),
      })),
    },
  }) as unknown as Kyma;

/** The series of `name` whose labels include every one of `labels`, as `state → value`. */
function byState(samples: Samples, name: string, labels: Record<string, string>): Record<string, number> {
  const states: Record<string, number> = {};
  for (const [key, value] of samples) {
    if (!key.startsWith(`${name}{`)) continue;
    if (!Object.entries(labels).every(([label, v]) => key.includes(`${label}="${v}"`))) continue;
    const state = /state="([^"]*)"/.exec(key)?.[1];
    if (state !== undefined) states[state] = value;
  }
  return states;
}

describe("upstream lifecycle-manager's metrics", function () {
  it('exports every state per Kyma and per module, 1 for the one it is in, with upstream’s labels', async () => {
    const registry = createRegistry();
    const kymas = [
      kyma(
        'kyma-a',
        'Ready',
        { keda: 'Ready', guard: 'Processing', typo1: 'Error', typo2: 'Warning' },
        {
          labels: { [LABELS.instanceId]: 'instance-a' },
          annotations: { [ANNOTATIONS.skrDomain]: 'shoot-a.kyma.example.com' },
        },
      ),
      kyma('kyma-b', undefined, {}),
    ];
    const releaseMetas = [{ spec: { moduleName: 'guard', mandatory: { version: '1.0.0' } } }];
    registerLifecycleManagerMetrics(registry, { kymas: () => kymas, releaseMetas: () => releaseMetas });
    const samples = parseMetrics(await registry.metrics());

    const a = { kyma_name: 'kyma-a', shoot: 'shoot-a', instance_id: 'instance-a' };
    expect(byState(samples, 'lifecycle_mgr_kyma_state', a)).to.deep.equal({
      Ready: 1,
      Processing: 0,
      Error: 0,
      Deleting: 0,
      Warning: 0,
    });
    // Before its first status a Kyma is in no state: every series 0, as upstream reports an empty state.
    expect(
      Object.values(byState(samples, 'lifecycle_mgr_kyma_state', { kyma_name: 'kyma-b' })),
    ).to.deep.equal([0, 0, 0, 0, 0]);
    expect(byState(samples, 'lifecycle_mgr_module_state', { ...a, module_name: 'keda' })).to.deep.equal({
      Ready: 1,
      Processing: 0,
      Error: 0,
      Deleting: 0,
      Warning: 0,
      Unmanaged: 0,
    });
    // Names no catalog knows fold into one bounded value, at their worst state.
    expect(byState(samples, 'lifecycle_mgr_module_state', { module_name: '(unknown)' })).to.include({
      Error: 1,
    });
    expect([...samples.keys()].some((key) => key.includes('typo'))).to.equal(false);
    // A mandatory module is reported in its own family only.
    expect(byState(samples, 'lifecycle_mgr_module_state', { module_name: 'guard' })).to.deep.equal({});
    expect(
      byState(samples, 'lifecycle_mgr_mandatory_module_state', { kyma_name: 'kyma-a', module_name: 'guard' }),
    ).to.deep.equal({ Ready: 0, Processing: 1, Error: 0, Deleting: 0, Warning: 0 });
  });

  it("counts failed reconciles under upstream's requeue reasons", async () => {
    const registry = createRegistry();
    const metrics = registerLifecycleManagerMetrics(registry, { kymas: () => [], releaseMetas: () => [] });
    const skrDown = new Error('reconcile Kyma kcp-system/a: connect ECONNREFUSED', {
      cause: new SkrFailure('SKRUnreachable', 'connect ECONNREFUSED'),
    });
    metrics.failed(kyma('a', 'Error', {}), skrDown);
    metrics.failed(kyma('a', 'Ready', {}), new Error('apply ModuleConfig: 500'));
    metrics.failed(kyma('a', 'Deleting', {}, { deletionTimestamp: '2026-01-01T00:00:00Z' }), new Error('x'));
    const samples = parseMetrics(await registry.metrics());
    const count = (reason: string) =>
      samples.get(`lifecycle_mgr_requeue_reason_total{requeue_reason="${reason}",requeue_type="unexpected"}`);
    expect(count('sync_context_retrieval')).to.equal(1);
    expect(count('processing_kyma_state')).to.equal(1);
    expect(count('kyma_deletion')).to.equal(1);
  });

  describe('the skr-agent process on real planes', function () {
    this.timeout(240_000);
    const namespace = 'lm-metrics';
    let env: Environment;
    let agent: AgentChild | undefined;

    before(async () => {
      env = await startEnvironment({ planes: ['kcp', 'skr1'] });
      await seedKcp(env, namespace, ['skr1']);
      await env
        .plane('kcp')
        .kubeConfig()
        .makeApiClient(CustomObjectsApi)
        .patchNamespacedCustomObject(
          {
            group: GROUP,
            version: KINDS.kyma.version,
            plural: KINDS.kyma.plural,
            namespace,
            name: 'skr1',
            body: {
              metadata: {
                labels: { [LABELS.instanceId]: 'instance-1' },
                annotations: { [ANNOTATIONS.skrDomain]: 'shoot-1.kyma.example.com' },
              },
            },
          },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        );
    });

    after(async () => {
      if (agent && agent.child.exitCode === null) {
        agent.child.kill('SIGTERM');
        await agent.exited;
      }
      await env?.stop();
    });

    it('exports lifecycle_mgr_kyma_state and lifecycle_mgr_module_state for the module it installed', async () => {
      const port = await freePort();
      const started = runAgent(env.plane('kcp').kubeconfigPath, namespace, [
        '--no-listener',
        '--lifecycle-manager-metrics',
        '--metrics-address',
        `127.0.0.1:${port}`,
      ]);
      agent = started;
      const labels = { kyma_name: 'skr1', shoot: 'shoot-1', instance_id: 'instance-1' };
      let samples: Samples = new Map();
      await waitUntil(
        'the agent reports the sample module Ready',
        async () => {
          samples = parseMetrics(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text());
          return (
            byState(samples, 'lifecycle_mgr_module_state', { ...labels, module_name: 'sample' })['Ready'] ===
            1
          );
        },
        120_000,
        500,
      ).catch((error: unknown) => {
        throw new Error(`agent output:\n${started.output().slice(-4000)}`, { cause: error });
      });
      expect(byState(samples, 'lifecycle_mgr_kyma_state', labels)).to.deep.equal({
        Ready: 1,
        Processing: 0,
        Error: 0,
        Deleting: 0,
        Warning: 0,
      });
      // This project's own fleet gauges are still there, beside them.
      expect(samples.get('skr_agent_modules{module="sample",state="Ready"}')).to.equal(1);
      // The purge is on by default: its families are there from the start, no purge yet.
      expect(samples.get('lifecycle_mgr_purgectrl_requests_total')).to.equal(0);
      expect(samples.get('lifecycle_mgr_purgectrl_time')).to.equal(0);
    });
  });
});
