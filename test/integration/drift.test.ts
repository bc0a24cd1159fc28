// Drift put back at once (decision 025), through the real path: a user's write of an object a module installed
// in the SKR → the SKR API server → skr-webhook (label-selected rule) → KCP listener → skr-agent's targeted revert.
// Real planes, a real registry, the agent and webhook as processes; requeues are an hour long, so only a callback
// explains an object put back within the test's waits.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import { GROUP, KINDS } from '@skr-watcher/api';
import { mergePatchCustomObject } from '@skr-watcher/kube';
import { createCatalog, publishModules } from '../support/system/modules.js';
import { SKR_KYMA, startLocalSystem, type LocalSystem } from '../support/system/index.js';
import { DRIFTER, drifterModule } from '../support/drifter-module.js';
import { eventually } from '../support/eventually.js';
import { parseMetrics, sumOf } from '../support/prometheus-text.js';

const NS = DRIFTER.namespace;
const CONFIG_MAP = DRIFTER.configMap;
const DEPLOYMENT = DRIFTER.deployment;
const INSTALLED_DATA = DRIFTER.installedData;

async function webhookDriftReviews(
  metricsPort: number,
): Promise<{ drift: number; ownWrite: number; all: number }> {
  const text = await (
    await fetch(`http://127.0.0.1:${metricsPort}/metrics`, { signal: AbortSignal.timeout(2_000) })
  ).text();
  const samples = parseMetrics(text);
  return {
    drift: sumOf(samples, 'skr_webhook_drift_reviews_total', 'verdict="drift"'),
    ownWrite: sumOf(samples, 'skr_webhook_drift_reviews_total', 'verdict="own_write"'),
    all: sumOf(samples, 'skr_webhook_drift_reviews_total'),
  };
}

describe('drift: an installed object edited or deleted in the SKR is put back at once (real planes, registry)', function () {
  this.timeout(600_000);
  let parent: string;
  let system: LocalSystem;
  let skr: KubeConfig;

  before(async () => {
    parent = await mkdtemp(join(tmpdir(), 'skr-drift-'));
    system = await startLocalSystem({
      dir: join(parent, 'system'),
      skrs: ['skr1'],
      modules: true,
      // No periodic pass within the test: the drifter module stays Processing (no node runs its Deployment).
      agentArgs: ['--requeue-processing', '1h', '--requeue-ready', '1h'],
    });
    if (!system.modules?.agentInstalls) throw new Error('this skr-agent does not install modules');
    const [published] = await publishModules(system.modules.registryHost, [drifterModule()]);
    await createCatalog(system.kcp, system.namespace, published!);
    skr = system.skr('skr1').kubeConfig();
    const api = skr.makeApiClient(CustomObjectsApi);
    const current = (await api.getNamespacedCustomObject(SKR_KYMA)) as { spec?: { modules?: unknown[] } };
    await mergePatchCustomObject(api, SKR_KYMA, {
      spec: { modules: [...(current.spec?.modules ?? []), { name: 'drifter' }] },
    });
    const core = skr.makeApiClient(CoreV1Api);
    const apps = skr.makeApiClient(AppsV1Api);
    await eventually(
      'the drifter module installed in skr1',
      async () => {
        await core.readNamespacedConfigMap({ name: CONFIG_MAP, namespace: NS });
        await apps.readNamespacedDeployment({ name: DEPLOYMENT, namespace: NS });
        return true;
      },
      120_000,
    );
    // The API server picks a new webhook configuration up after a moment: wait until it sends the webhook a
    // write of an installed object (the agent's own applies, one per object per pass, each a full pass).
    await eventually(
      'the API server sends writes of installed objects to skr-webhook',
      async () => {
        if ((await webhookDriftReviews(system.skr('skr1').webhookMetricsPort)).all > 0) return true;
        await kickFullPass();
        return undefined;
      },
      120_000,
      1_000,
    );
    // Let the passes those kicks queued finish: a pass running during an edit would put it back before the
    // targeted revert reads it (reverted all the same, but without an Event).
    let last = -1;
    await eventually(
      'the agent idle (no installed object written for 3 s)',
      async () => {
        const now = (await webhookDriftReviews(system.skr('skr1').webhookMetricsPort)).all;
        const idle = now === last;
        last = now;
        return idle ? true : undefined;
      },
      120_000,
      3_000,
    );
  });
  let failed = false;
  afterEach(function () {
    if (this.currentTest?.state === 'failed') failed = true;
  });
  after(async () => {
    // A failure keeps the logs (agent, webhook, planes) for a look.
    await system?.stop({ keepDir: failed });
    if (failed) console.log(`drift test: logs kept in ${parent}`);
    else if (parent) await rm(parent, { recursive: true, force: true });
  });

  /** A label change on the KCP Kyma makes the agent run a full pass of it (its Kyma watch). */
  async function kickFullPass(): Promise<void> {
    await mergePatchCustomObject(
      system.kcp.makeApiClient(CustomObjectsApi),
      {
        group: GROUP,
        version: KINDS.kyma.version,
        plural: KINDS.kyma.plural,
        namespace: system.namespace,
        name: 'skr1',
      },
      { metadata: { labels: { 'drift-test/pass': String(Date.now()) } } },
    );
  }

  async function driftEvents(): Promise<string[]> {
    const list = await system.kcp
      .makeApiClient(CoreV1Api)
      .listNamespacedEvent({ namespace: system.namespace, fieldSelector: 'reason=DriftReverted' });
    return list.items.map((event) => event.message ?? '');
  }

  it('an edited ConfigMap and a deleted Deployment are put back, each with an Event on the Kyma', async () => {
    const core = skr.makeApiClient(CoreV1Api);
    const apps = skr.makeApiClient(AppsV1Api);
    await core.patchNamespacedConfigMap(
      {
        name: CONFIG_MAP,
        namespace: NS,
        fieldManager: 'drift-test',
        body: { data: { mode: 'edited by a user' } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await eventually('the ConfigMap edit put back', async () => {
      const read = await core.readNamespacedConfigMap({ name: CONFIG_MAP, namespace: NS });
      return read.data?.['mode'] === INSTALLED_DATA.mode ? true : undefined;
    });

    const before = await apps.readNamespacedDeployment({ name: DEPLOYMENT, namespace: NS });
    await apps.deleteNamespacedDeployment({ name: DEPLOYMENT, namespace: NS });
    await eventually('the deleted Deployment re-created', async () => {
      const read = await apps.readNamespacedDeployment({ name: DEPLOYMENT, namespace: NS });
      return read.metadata?.uid !== before.metadata?.uid ? true : undefined;
    });

    const events = await eventually('Events naming both reverts', async () => {
      const messages = await driftEvents();
      const named = (text: string) => messages.some((m) => m.includes(text));
      if (
        named(`ConfigMap ${NS}/${CONFIG_MAP} was changed`) &&
        named(`Deployment ${NS}/${DEPLOYMENT} was deleted`)
      )
        return messages;
      throw new Error(`DriftReverted Events so far: ${JSON.stringify(messages)}`);
    });
    expect(events.join('\n')).to.match(/Manifest kcp-system\/skr1-drifter-\d+/);
  });

  it("the agent's own writes wake nothing: only the two user writes were drift", async () => {
    const port = system.skr('skr1').webhookMetricsPort;
    const start = await webhookDriftReviews(port);
    // The previous test's two writes (and its reverts, the agent's own) were reviewed: exactly two were drift.
    expect(start.drift).to.equal(2);
    // Full passes apply every installed object again: each a write the webhook sees, none of them drift.
    for (let pass = 0; pass < 2; pass++) {
      const seen = (await webhookDriftReviews(port)).ownWrite;
      await kickFullPass();
      await eventually('a full pass re-applied the installed objects', async () =>
        (await webhookDriftReviews(port)).ownWrite > seen ? true : undefined,
      );
    }
    const end = await webhookDriftReviews(port);
    expect(end.ownWrite).to.be.greaterThan(start.ownWrite);
    expect(end.drift).to.equal(2);
  });
});
