// Targeted drift reverts paced per object on real planes (KCP, SKR, registry): a writer in the SKR that fights the
// agent gets a revert at once, then one per doubling window, and one Event on the Kyma whose count says how many
// writes it folds; the full pass and the next due revert still put the object back. Callbacks are handed to the
// agent's targeted paths as the router hands them (targeted/router.ts → objectChanged). The pacing's own rules
// are unit-tested in drift-holds.test.ts.
import { expect } from 'chai';
import { CoreV1Api, type CoreV1Event } from '@kubernetes/client-node';
import { manifestName, type ChangeFingerprint } from '@skr-watcher/api';
import { createRegistry, type Registry } from '@skr-watcher/telemetry';
import { kubeConfigAsAgent } from '../../test/support/kcp-rbac.js';
import { createManager } from '../src/manager/index.js';
import { createRegistryInstallation } from '../src/reconcile/manifests/source.js';
import { DRIFT_EVENT_REASON, DRIFT_PACING } from '../src/targeted/drift.js';
import type { ModuleCrChange } from '../src/reconcile/modules/mirror-lanes.js';
import { getOrUndefined, kymaRef } from './support/planes.js';
import { configMapYaml, crdYaml, docs, moduleSuite } from './support/modules.js';

describe('drift pacing on real planes: a writer fighting the agent', function () {
  this.timeout(300_000);
  const suite = moduleSuite();
  const { planes } = suite;
  const skrCore = () => planes.skr.makeApiClient(CoreV1Api);
  /** The reconciler's clock: real time, moved on by the test. */
  let offsetMs = 0;
  let registry: Registry;

  beforeEach(() => {
    offsetMs = 0;
    registry = createRegistry();
  });

  /** The agent's entry points this suite drives: the full pass of a Kyma and a callback's targeted path. */
  const agent = {
    async start(): Promise<void> {
      suite.state.installation = await createRegistryInstallation({ settings: suite.settings() });
      suite.state.manager = createManager({
        kcp: await kubeConfigAsAgent(planes.kcp, suite.state.ns),
        namespace: suite.state.ns,
        skrTimeoutMs: 10_000,
        modules: suite.state.installation,
        registry,
        clock: () => new Date(Date.now() + offsetMs),
      });
    },
    fullPass: (kyma: string) => suite.state.manager!.reconciler.reconcile(`${suite.state.ns}/${kyma}`),
    callback: (kyma: string, change: ModuleCrChange) =>
      suite.state.manager!.targeted.objectChanged(`${suite.state.ns}/${kyma}`, change),
  };

  const outcomes = async (): Promise<Record<string, number>> => {
    const metric = (await registry.getMetricsAsJSON()).find(
      (m) => m.name === 'skr_agent_drift_reverts_total',
    );
    const values = (metric?.values ?? []) as { value: number; labels: Record<string, unknown> }[];
    return Object.fromEntries(values.map((v) => [String(v.labels['outcome']), v.value]));
  };

  const driftEvents = async (): Promise<CoreV1Event[]> =>
    (
      await planes.kcp.makeApiClient(CoreV1Api).listNamespacedEvent({
        namespace: suite.state.ns,
        fieldSelector: `reason=${DRIFT_EVENT_REASON}`,
      })
    ).items;

  it('a ConfigMap written 20 times in a row is put back a few times, with one Event counting the writes; the full pass and the next due revert put it back', async function () {
    const module = `fight${String.fromCharCode(97 + (process.pid % 26))}`;
    const name = `${module}-config`;
    const namespace = 'kyma-system';
    await suite.publish({
      moduleName: module,
      version: '1.0.0',
      rawManifest: docs(
        crdYaml(`${module}.test.io`, 'Fight'),
        configMapYaml(name, namespace, { mode: 'installed' }),
      ),
    });
    await suite.kyma('k1', [{ name: module }]);
    await agent.start();
    await suite.reconcileUntil(
      'k1',
      async () => (await suite.moduleStatus('k1', module))?.state === 'Ready',
      'module Ready',
    );
    const mode = async () => (await skrCore().readNamespacedConfigMap({ name, namespace })).data?.['mode'];
    expect(await mode()).to.equal('installed');

    /** A user's write in the SKR, then the callback the webhook sends about it. */
    const fight = async (value: string) => {
      const before = await skrCore().readNamespacedConfigMap({ name, namespace });
      await skrCore().replaceNamespacedConfigMap({
        name,
        namespace,
        fieldManager: 'fighting-operator',
        body: { ...before, data: { mode: value } },
      });
      const fingerprint: ChangeFingerprint = {
        uid: before.metadata!.uid!,
        previousResourceVersion: before.metadata!.resourceVersion!,
      };
      const change: ModuleCrChange = {
        gvk: { group: '', version: 'v1', kind: 'ConfigMap' },
        namespace,
        name,
        fingerprint,
        receivedAtMs: Date.now(),
      };
      await agent.callback('k1', change);
    };

    // 20 writes over some 4 s: put back at once, after 1 s and after 3 s (7 s, 15 s on a slow machine).
    const writes = 20;
    for (let index = 0; index < writes; index++) {
      await fight(`fought ${index}`);
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    const fought = await outcomes();
    const reverted = fought['reverted'] ?? 0;
    expect(reverted, JSON.stringify(fought)).to.be.within(2, 6);
    expect(fought['deferred'], JSON.stringify(fought)).to.equal(writes - reverted);
    // One Event for the object, its count the writes it folded so far: the reverts' and those deferred before them.
    let events = await driftEvents();
    expect(events.map((event) => event.message)).to.have.length(1);
    expect(events[0]!.message).to.match(new RegExp(`ConfigMap ${namespace}/${name}`));
    expect(events[0]!.count).to.be.within(reverted, writes);
    const eventName = events[0]!.metadata!.name;
    // The last write was deferred: the user's value stands until a full pass or the next due revert.
    expect(await mode()).to.equal(`fought ${writes - 1}`);
    await agent.fullPass('k1');
    expect(await mode(), 'the full pass puts it back').to.equal('installed');

    // Once the window passed (at most 5 min), the next write is put back on its callback, and the Event's count
    // holds every write.
    offsetMs += DRIFT_PACING.maxMs;
    await fight('fought once more');
    expect(await mode()).to.equal('installed');
    expect(await outcomes()).to.include({ reverted: reverted + 1, deferred: writes - reverted });
    events = await driftEvents();
    expect(events).to.have.length(1);
    expect(events[0]!.metadata!.name).to.equal(eventName);
    expect(events[0]!.count).to.equal(writes + 1);
    const manifest = `${suite.state.ns}/${manifestName(`kyma-project.io/module/${module}`, 'k1', module)}`;
    expect(events[0]!.message).to.match(
      new RegExp(
        `^ConfigMap ${namespace}/${name} was changed in the SKR \\d+ times in the last 5m\\d*s?; put back as Manifest ${manifest} installs it`,
      ),
    );

    await suite.api().deleteNamespacedCustomObject(kymaRef(suite.state.ns, 'k1'));
    await suite.reconcileUntil(
      'k1',
      async () =>
        (await getOrUndefined(() => suite.api().getNamespacedCustomObject(kymaRef(suite.state.ns, 'k1')))) ===
        undefined,
      'Kyma gone',
    );
  });
});
