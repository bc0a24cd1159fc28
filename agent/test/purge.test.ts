// Upstream lifecycle-manager's purge (its e2e purge-controller and purge-metrics), on a real KCP, a real SKR and a
// real registry: a user's finalizer on a module's default CR holds the Kyma's deletion up until the purge timeout has
// passed since the deletion began; then the finalizer is removed, the Module CR, the KCP Kyma and the SKR Kyma are
// gone, an Event names what was purged, and the purge metrics show one purge with a duration above 0. CRDs named by
// --skip-finalizer-purging-for are left alone; the flags carry upstream's names and defaults.
import { expect } from 'chai';
import { CoreV1Api } from '@kubernetes/client-node';
import { ANNOTATIONS, LABELS, type Kyma } from '@skr-watcher/api';
import { createRegistry } from '@skr-watcher/telemetry';
import { parseMetrics } from '../../test/support/prometheus-text.js';
import { agentConfigFromFlags, ConfigError } from '../src/config.js';
import { registerPurgeMetrics } from '../src/lifecycle-manager-metrics.js';
import { DEFAULT_PURGE_TIMEOUT_MS, PURGE_ERRORS, type PurgeSettings } from '../src/reconcile/kyma/purge.js';
import { custom, getOrUndefined, kymaRef } from './support/planes.js';
import {
  configMapYaml,
  crdYaml,
  docs,
  mergePatch,
  moduleKind,
  moduleSuite,
  type Json,
} from './support/modules.js';
import { testRunFlags } from './support/run-flags.js';

/** The e2e's --purge-finalizer-timeout. */
const PURGE_TIMEOUT_MS = 5_000;

describe("upstream lifecycle-manager's purge of a Kyma whose deletion finalizers in the SKR hold up", function () {
  this.timeout(300_000);
  const suite = moduleSuite();
  const { planes } = suite;
  // Time as the reconciler sees it: moved past the purge timeout instead of waited for.
  let ahead = 0;
  const clock = () => new Date(Date.now() + ahead);
  beforeEach(() => {
    ahead = 0;
  });

  const defaultCr = (module: string) => {
    const { group, plural } = moduleKind(module);
    return getOrUndefined(() =>
      custom(planes.skr).getNamespacedCustomObject({
        group,
        version: 'v1',
        plural,
        namespace: 'kyma-system',
        name: `${module}-default`,
      }),
    ) as Promise<Json | undefined>;
  };
  const holdDefaultCr = async (module: string, finalizers: string[]) => {
    const { group, plural } = moduleKind(module);
    await custom(planes.skr).patchNamespacedCustomObject(
      {
        group,
        version: 'v1',
        plural,
        namespace: 'kyma-system',
        name: `${module}-default`,
        body: { metadata: { finalizers } },
      },
      mergePatch,
    );
  };
  const kcpKymaGone = async (name: string) =>
    (await getOrUndefined(() =>
      custom(planes.kcp).getNamespacedCustomObject(kymaRef(suite.state.ns, name)),
    )) === undefined;
  const skrKymaGone = async () =>
    (await getOrUndefined(() =>
      custom(planes.skr).getNamespacedCustomObject(kymaRef('kyma-system', 'default')),
    )) === undefined;
  const purgeEvents = async () =>
    (
      await planes.kcp.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace: suite.state.ns })
    ).items.filter((event) => event.reason === 'SKRPurged');

  /** Module `module` Ready in the Kyma, its default CR (the Module CR) held by a user's finalizer. */
  async function installAndHold(kymaName: string, module: string, purge: PurgeSettings) {
    const { group, kind } = moduleKind(module);
    await suite.publish({
      moduleName: module,
      version: '1.0.0',
      rawManifest: docs(crdYaml(group, kind), configMapYaml(`${module}-operator`, 'kyma-system')),
      defaultCr: `apiVersion: ${group}/v1\nkind: ${kind}\nmetadata:\n  name: ${module}-default\n  namespace: kyma-system\nspec:\n  greeting: hello\n`,
    });
    await suite.kyma(kymaName, [{ name: module }]);
    await suite.start({}, { clock, purge });
    await suite.reconcileUntil(
      kymaName,
      async () => (await suite.moduleStatus(kymaName, module))?.state === 'Ready',
      'module Ready',
    );
    await holdDefaultCr(module, ['example.com/user-finalizer']);
  }

  /** Deletes the KCP Kyma and runs passes short of the purge timeout: the deletion waits on the Module CR. */
  async function deleteAndWait(kymaName: string, module: string) {
    await custom(planes.kcp).deleteNamespacedCustomObject(kymaRef(suite.state.ns, kymaName));
    await suite.reconcileUntil(
      kymaName,
      async () => (await defaultCr(module))?.metadata.deletionTimestamp !== undefined,
      'the Module CR deleting, held by its finalizer',
    );
    for (let pass = 0; pass < 3; pass++)
      await suite.state.manager!.reconciler.reconcile(`${suite.state.ns}/${kymaName}`);
    expect((await defaultCr(module))?.metadata.finalizers).to.deep.equal(['example.com/user-finalizer']);
    expect(await kcpKymaGone(kymaName), 'KCP Kyma still there').to.equal(false);
  }

  it('purge-controller and purge-metrics: after the purge timeout the finalizer goes, then the Module CR, the KCP Kyma and the SKR Kyma; one purge counted, its time above 0', async function () {
    const registry = createRegistry();
    const observer = registerPurgeMetrics(registry);
    const module = 'purged';
    await installAndHold('kyma-purge', module, { timeoutMs: PURGE_TIMEOUT_MS, skipFor: [], observer });
    await deleteAndWait('kyma-purge', module);
    const before = parseMetrics(await registry.metrics());
    expect(before.get('lifecycle_mgr_purgectrl_requests_total')).to.equal(0);
    expect(await purgeEvents()).to.have.length(0);

    ahead = PURGE_TIMEOUT_MS + 1_000;
    await suite.reconcileUntil(
      'kyma-purge',
      async () => (await kcpKymaGone('kyma-purge')) && (await skrKymaGone()),
      'KCP Kyma and SKR Kyma gone',
    );
    expect(await defaultCr(module), 'Module CR gone').to.equal(undefined);
    // Passes after the Kyma is gone find nothing to purge.
    for (let pass = 0; pass < 2; pass++)
      await suite.state.manager!.reconciler.reconcile(`${suite.state.ns}/kyma-purge`);

    const after = parseMetrics(await registry.metrics());
    expect(after.get('lifecycle_mgr_purgectrl_requests_total')).to.equal(1);
    expect(after.get('lifecycle_mgr_purgectrl_time')).to.be.greaterThan(0);
    expect([...after.keys()].filter((key) => key.startsWith('lifecycle_mgr_purgectrl_error{'))).to.deep.equal(
      [],
    );
    const events = await purgeEvents();
    expect(events, 'one SKRPurged Event').to.have.length(1);
    expect(events[0]!.type).to.equal('Warning');
    expect(events[0]!.message).to.include(`${moduleKind(module).kind} kyma-system/${module}-default`);
    expect(events[0]!.message).to.include('1 finalizers removed from 1 objects');
  });

  it('--skip-finalizer-purging-for: the CRDs it names keep their finalizers, and the deletion keeps waiting', async function () {
    const module = 'skipped';
    const { group, plural } = moduleKind(module);
    await installAndHold('kyma-skip', module, {
      timeoutMs: PURGE_TIMEOUT_MS,
      skipFor: [`${plural}.${group}`],
    });
    await deleteAndWait('kyma-skip', module);

    ahead = PURGE_TIMEOUT_MS + 1_000;
    for (let pass = 0; pass < 3; pass++)
      await suite.state.manager!.reconciler.reconcile(`${suite.state.ns}/kyma-skip`);
    expect((await defaultCr(module))?.metadata.finalizers).to.deep.equal(['example.com/user-finalizer']);
    expect(await kcpKymaGone('kyma-skip'), 'KCP Kyma still there').to.equal(false);

    // The user lets go: the deletion finishes as it would without a purge.
    await holdDefaultCr(module, []);
    await suite.reconcileUntil('kyma-skip', () => kcpKymaGone('kyma-skip'), 'KCP Kyma gone');
  });
});

describe('purge metrics', function () {
  it("set upstream's error series per Kyma and reason while a purge fails, and clear them once one finishes", async function () {
    const registry = createRegistry();
    const observer = registerPurgeMetrics(registry);
    const kyma = {
      metadata: {
        name: 'kyma-a',
        labels: { [LABELS.instanceId]: 'instance-a' },
        annotations: { [ANNOTATIONS.skrDomain]: 'shoot-a.kyma.example.com' },
      },
    } as unknown as Kyma;
    observer.started();
    observer.failed(kyma, PURGE_ERRORS.cleanup);
    const failing = parseMetrics(await registry.metrics());
    expect(
      failing.get(
        'lifecycle_mgr_purgectrl_error{kyma_name="kyma-a",shoot="shoot-a",instance_id="instance-a",err_reason="CleanupError"}',
      ),
    ).to.equal(1);
    observer.started();
    observer.finished(kyma, 250);
    const finished = parseMetrics(await registry.metrics());
    expect(finished.get('lifecycle_mgr_purgectrl_requests_total')).to.equal(2);
    expect(finished.get('lifecycle_mgr_purgectrl_time')).to.equal(0.25);
    expect(
      [...finished.keys()].filter((key) => key.startsWith('lifecycle_mgr_purgectrl_error{')),
    ).to.deep.equal([]);
  });
});

describe('purge flags', function () {
  it("carry upstream's names and defaults: on, 5m, nothing skipped; =false turns the purge off", function () {
    expect(agentConfigFromFlags(testRunFlags('ns')).purge).to.deep.equal({
      timeoutMs: DEFAULT_PURGE_TIMEOUT_MS,
      skipFor: [],
    });
    expect(
      agentConfigFromFlags(
        testRunFlags('ns', {
          enablePurgeFinalizer: true,
          purgeFinalizerTimeout: '5s',
          skipFinalizerPurgingFor: 'ingressroutetcps.traefik.containo.us, *.helm.cattle.io',
        }),
      ).purge,
    ).to.deep.equal({
      timeoutMs: 5_000,
      skipFor: ['ingressroutetcps.traefik.containo.us', '*.helm.cattle.io'],
    });
    expect(agentConfigFromFlags(testRunFlags('ns', { enablePurgeFinalizer: 'false' })).purge).to.equal(
      undefined,
    );
  });

  it('refuses what is no boolean, no duration or no CRD name', function () {
    expect(() => agentConfigFromFlags(testRunFlags('ns', { enablePurgeFinalizer: 'yes' }))).to.throw(
      ConfigError,
      /--enable-purge-finalizer/,
    );
    expect(() => agentConfigFromFlags(testRunFlags('ns', { purgeFinalizerTimeout: 'soon' }))).to.throw(
      /--purge-finalizer-timeout/,
    );
    expect(() => agentConfigFromFlags(testRunFlags('ns', { skipFinalizerPurgingFor: 'traefik' }))).to.throw(
      ConfigError,
      /--skip-finalizer-purging-for/,
    );
  });
});
