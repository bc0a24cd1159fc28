// The controller's triggers on a real KCP: every watched kind maps to the right Kyma keys, status-only
// writes do not loop, runtime-ids resolve through the watch cache, and requeues follow the reconciler's answer.
import { expect } from 'chai';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS, parseManifest, parseModuleConfig } from '@skr-watcher/api';
import { sharedEnvironment } from '@skr-watcher/testenv';
import { createController, type Controller } from '../src/controller.js';
import type { ReconcileContext } from '../src/reconcile/context.js';
import { manifestsOf } from '../src/reconcile/manifests/manifests-of-kyma.js';
import { moduleConfigsOf } from '../src/reconcile/modules/module-config.js';
import { waitUntil } from '../../test/support/eventually.js';

describe('controller triggers on a real KCP', function () {
  this.timeout(120_000);
  let kcp: KubeConfig;
  let api: CustomObjectsApi;
  let core: CoreV1Api;
  let controller: Controller;
  const namespace = `controller-${Date.now()}`;
  /** Keys the controller asked to reconcile, in order. */
  const reconciled: string[] = [];
  let answer: { requeueAfterMs?: number } = {};

  const kind = (k: keyof typeof KINDS) => ({
    group: GROUP,
    version: KINDS[k].version,
    plural: KINDS[k].plural,
    namespace,
  });
  const createKyma = (name: string, modules: string[], labels: Record<string, string> = {}) =>
    api.createNamespacedCustomObject({
      ...kind('kyma'),
      body: {
        apiVersion: `${GROUP}/${KINDS.kyma.version}`,
        kind: 'Kyma',
        metadata: { name, namespace, labels },
        spec: { channel: 'regular', modules: modules.map((name) => ({ name })) },
      },
    });
  const createModuleConfig = (name: string, labels: Record<string, string>, kyma: string, module: string) =>
    api.createNamespacedCustomObject({
      ...kind('moduleConfig'),
      body: {
        apiVersion: `${GROUP}/${KINDS.moduleConfig.version}`,
        kind: 'ModuleConfig',
        metadata: { name, namespace, labels },
        spec: {
          kyma,
          module,
          resource: {
            apiVersion: `${GROUP}/v1alpha1`,
            kind: 'Sample',
            metadata: { name: module },
            spec: { a: 1 },
          },
        },
      },
    });
  /** Runs `change` and returns the keys reconciled because of it (after the queue settles). */
  async function keysAfter(change: () => Promise<unknown>, expected: string[]): Promise<string[]> {
    await controller.queue.whenIdle();
    const from = reconciled.length;
    await change();
    await waitUntil(`reconciles of ${expected.join(', ')}`, () =>
      expected.every((key) => reconciled.slice(from).includes(key)),
    );
    await controller.queue.whenIdle();
    return [...new Set(reconciled.slice(from))].sort();
  }
  let markers = 0;
  /**
   * Keys reconciled after `change` that a trigger should ignore, with no waiting window: a marker that does
   * trigger follows on the same watch (a label on gamma, or a Secret labelled for it), whose events arrive in
   * order; once gamma is reconciled and the queue is idle, anything `change` had enqueued has run too.
   */
  async function keysAfterIgnored(
    change: () => Promise<unknown>,
    watch: 'kyma' | 'secret',
  ): Promise<string[]> {
    const marker = `marker-${++markers}`;
    const keys = await keysAfter(async () => {
      await change();
      await (watch === 'kyma'
        ? api.patchNamespacedCustomObject({
            ...kind('kyma'),
            name: 'gamma',
            body: [{ op: 'add', path: '/metadata/labels/example.com~1marker', value: marker }],
          })
        : core.createNamespacedSecret({
            namespace,
            body: { metadata: { name: marker, namespace, labels: { [LABELS.kymaName]: 'gamma' } } },
          }));
    }, [`${namespace}/gamma`]);
    return keys.filter((key) => key !== `${namespace}/gamma`);
  }

  before(async () => {
    const env = await sharedEnvironment();
    kcp = env.plane('kcp').kubeConfig();
    api = kcp.makeApiClient(CustomObjectsApi);
    core = kcp.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    await createKyma('alpha', ['sample'], { [LABELS.runtimeId]: 'runtime-alpha' });
    await createKyma('beta', ['other'], { [LABELS.runtimeId]: 'runtime-beta' });
    controller = createController({
      kcp,
      namespace,
      workers: 2,
      manifests: true,
      reconciler: {
        reconcile: async (key) => {
          reconciled.push(key);
          return answer;
        },
      },
    });
    await controller.start();
  });

  after(async () => {
    await controller?.stop();
  });

  it('reconciles every existing Kyma once the caches are synced', async () => {
    await waitUntil(
      'both Kymas reconciled',
      () => reconciled.includes(`${namespace}/alpha`) && reconciled.includes(`${namespace}/beta`),
    );
    expect(controller.synced).to.equal(true);
    expect(controller.kymaKeys().sort()).to.deep.equal([`${namespace}/alpha`, `${namespace}/beta`]);
  });

  it('resolves a runtime-id to its Kyma through the watch cache, and an unknown one to nothing', async () => {
    expect(controller.resolveKyma('runtime-alpha')).to.deep.equal({ namespace, name: 'alpha' });
    expect(controller.resolveKyma('runtime-unknown')).to.equal(undefined);
    const keys = await keysAfter(
      () => createKyma('gamma', [], { [LABELS.runtimeId]: 'runtime-gamma' }),
      [`${namespace}/gamma`],
    );
    expect(keys).to.deep.equal([`${namespace}/gamma`]);
    expect(controller.resolveKyma('runtime-gamma')).to.deep.equal({ namespace, name: 'gamma' });
  });

  it('reconciles a Kyma on spec and label changes but not on status-only or finalizer-only writes', async () => {
    const specChange = await keysAfter(
      () =>
        api.patchNamespacedCustomObject({
          ...kind('kyma'),
          name: 'alpha',
          body: [{ op: 'replace', path: '/spec/channel', value: 'fast' }],
        }),
      [`${namespace}/alpha`],
    );
    expect(specChange).to.deep.equal([`${namespace}/alpha`]);
    const statusOnly = await keysAfterIgnored(
      () =>
        api.patchNamespacedCustomObjectStatus({
          ...kind('kyma'),
          name: 'alpha',
          body: [{ op: 'add', path: '/status', value: { state: 'Ready' } }],
        }),
      'kyma',
    );
    expect(statusOnly, 'a status write must not trigger a reconcile (it would loop)').to.deep.equal([]);
    const finalizerOnly = await keysAfterIgnored(
      () =>
        api.patchNamespacedCustomObject({
          ...kind('kyma'),
          name: 'alpha',
          body: [{ op: 'add', path: '/metadata/finalizers', value: ['example.com/test'] }],
        }),
      'kyma',
    );
    expect(finalizerOnly, 'adding a finalizer (the reconciler does, mid-pass) is no trigger').to.deep.equal(
      [],
    );
    const labelled = await keysAfter(
      () =>
        api.patchNamespacedCustomObject({
          ...kind('kyma'),
          name: 'alpha',
          body: [
            {
              op: 'add',
              path: `/metadata/labels/${LABELS.skipReconciliation.replace('/', '~1')}`,
              value: 'false',
            },
          ],
        }),
      [`${namespace}/alpha`],
    );
    expect(labelled).to.deep.equal([`${namespace}/alpha`]);
  });

  // The module catalog is copied into every SKR (decision 009): a catalog change concerns every Kyma.
  it('maps a ModuleTemplate and a ModuleReleaseMeta to every Kyma whose SKR gets the module catalog', async () => {
    const keys = await keysAfter(
      () =>
        api.createNamespacedCustomObject({
          ...kind('moduleTemplate'),
          body: {
            apiVersion: `${GROUP}/${KINDS.moduleTemplate.version}`,
            kind: 'ModuleTemplate',
            metadata: { name: 'sample-9.9.9', namespace },
            spec: { moduleName: 'sample', version: '9.9.9' },
          },
        }),
      [`${namespace}/alpha`],
    );
    expect(keys).to.deep.equal(controller.kymaKeys().sort());
    const metaKeys = await keysAfter(
      () =>
        api.createNamespacedCustomObject({
          ...kind('moduleReleaseMeta'),
          body: {
            apiVersion: `${GROUP}/${KINDS.moduleReleaseMeta.version}`,
            kind: 'ModuleReleaseMeta',
            metadata: { name: 'other', namespace },
            spec: { moduleName: 'other', channels: [{ channel: 'regular', version: '1.0.0' }] },
          },
        }),
      [`${namespace}/beta`],
    );
    expect(metaKeys).to.deep.equal(controller.kymaKeys().sort());
  });

  it('maps a Watcher change to every Kyma', async () => {
    const keys = await keysAfter(
      () =>
        api.createNamespacedCustomObject({
          ...kind('watcher'),
          body: {
            apiVersion: `${GROUP}/${KINDS.watcher.version}`,
            kind: 'Watcher',
            metadata: { name: 'kyma-watcher', namespace },
            spec: {
              manager: 'lifecycle-manager',
              resourceToWatch: { group: GROUP, version: 'v1beta2', resource: 'kymas' },
              field: 'spec',
            },
          },
        }),
      [`${namespace}/alpha`, `${namespace}/beta`, `${namespace}/gamma`],
    );
    expect(keys).to.deep.equal([`${namespace}/alpha`, `${namespace}/beta`, `${namespace}/gamma`]);
  });

  it('maps a SyncResource and a labelled kubeconfig Secret to their Kyma', async () => {
    const syncKeys = await keysAfter(
      () =>
        api.createNamespacedCustomObject({
          ...kind('syncResource'),
          body: {
            apiVersion: `${GROUP}/${KINDS.syncResource.version}`,
            kind: 'SyncResource',
            metadata: { name: 'beta-extras', namespace },
            spec: { kyma: 'beta', items: [] },
          },
        }),
      [`${namespace}/beta`],
    );
    expect(syncKeys).to.deep.equal([`${namespace}/beta`]);
    const secretKeys = await keysAfter(
      () =>
        core.createNamespacedSecret({
          namespace,
          body: {
            metadata: { name: 'kubeconfig-gamma', namespace, labels: { [LABELS.kymaName]: 'gamma' } },
            stringData: { config: 'apiVersion: v1\nkind: Config\n' },
          },
        }),
      [`${namespace}/gamma`],
    );
    expect(secretKeys).to.deep.equal([`${namespace}/gamma`]);
    const unlabelled = await keysAfterIgnored(
      () =>
        core.createNamespacedSecret({
          namespace,
          body: { metadata: { name: 'unrelated', namespace }, stringData: { a: 'b' } },
        }),
      'secret',
    );
    expect(unlabelled).to.deep.equal([]);
  });

  // The cache holds Secret metadata only: a certificate Secret is told apart by its type (the server leaves it out)
  // or, made by hand as Opaque, by the name `<kyma>-webhook-tls`.
  for (const certificate of [
    { kyma: 'delta', name: 'delta-webhook-tls', type: 'Opaque', as: 'named `<kyma>-webhook-tls`' },
    {
      kyma: 'epsilon',
      name: 'epsilon-serving-cert',
      type: 'kubernetes.io/tls',
      as: 'of type tls (cert-manager)',
    },
  ]) {
    it(`knows a kubeconfig Secret's version while a certificate Secret ${certificate.as} carries the same label`, async () => {
      const { kyma } = certificate;
      const labels = { [LABELS.kymaName]: kyma };
      // The certificate first: one watch delivers both in order.
      await core.createNamespacedSecret({
        namespace,
        body: {
          metadata: { name: certificate.name, namespace, labels },
          type: certificate.type,
          stringData: { 'tls.crt': 'not read', 'tls.key': 'not read' },
        },
      });
      const kubeconfig = await core.createNamespacedSecret({
        namespace,
        body: {
          metadata: { name: `kubeconfig-${kyma}`, namespace, labels },
          stringData: { config: 'apiVersion: v1\nkind: Config\n' },
        },
      });
      // Without the kubeconfig Secret cached, or with the certificate counted as a second one, it stays undefined.
      await waitUntil(`a version for ${kyma}`, () => controller.kubeconfigSecret(kyma) !== undefined);
      expect(controller.kubeconfigSecret(kyma)).to.deep.equal({
        name: `kubeconfig-${kyma}`,
        version: `${kubeconfig.metadata?.uid}/${kubeconfig.metadata?.resourceVersion}`,
      });
    });
  }

  it('wakes no Kyma it does not cache for a Secret labelled with its name', async () => {
    const keys = await keysAfterIgnored(
      () =>
        core.createNamespacedSecret({
          namespace,
          body: {
            metadata: { name: 'kubeconfig-elsewhere', namespace, labels: { [LABELS.kymaName]: 'elsewhere' } },
            stringData: { config: 'apiVersion: v1\nkind: Config\n' },
          },
        }),
      'secret',
    );
    expect(keys).to.deep.equal([]);
  });

  it('maps a ModuleConfig edited or deleted by hand to its Kyma', async () => {
    await createModuleConfig('alpha-sample', { [LABELS.kymaName]: 'alpha' }, 'alpha', 'sample');
    const edited = await keysAfter(
      () =>
        api.patchNamespacedCustomObject({
          ...kind('moduleConfig'),
          name: 'alpha-sample',
          body: [{ op: 'replace', path: '/spec/resource/metadata/name', value: 'renamed-by-hand' }],
        }),
      [`${namespace}/alpha`],
    );
    expect(edited).to.deep.equal([`${namespace}/alpha`]);
    const deleted = await keysAfter(
      () => api.deleteNamespacedCustomObject({ ...kind('moduleConfig'), name: 'alpha-sample' }),
      [`${namespace}/alpha`],
    );
    expect(deleted).to.deep.equal([`${namespace}/alpha`]);
  });

  it('caches each Manifest and ModuleConfig as the reconciler reads it: one copy, with every field a pass reads', async () => {
    const labels = { [LABELS.kymaName]: 'beta', [LABELS.moduleName]: 'other' };
    await api.createNamespacedCustomObject({
      ...kind('manifest'),
      body: {
        apiVersion: `${GROUP}/${KINDS.manifest.version}`,
        kind: 'Manifest',
        metadata: { name: 'beta-other', namespace, labels, finalizers: ['test/kept'] },
        spec: {
          remote: false,
          version: '1.2.3',
          install: {
            name: 'raw-manifest',
            source: { repo: 'registry.test', name: 'kyma/other', ref: '1.2.3' },
          },
          resource: {
            apiVersion: `${GROUP}/v1alpha1`,
            kind: 'Other',
            metadata: { name: 'default' },
            spec: { a: 1 },
          },
          localizedImages: ['registry.test/other:1.2.3'],
        },
      },
    });
    await api.patchNamespacedCustomObjectStatus({
      ...kind('manifest'),
      name: 'beta-other',
      body: [
        {
          op: 'add',
          path: '/status',
          value: {
            state: 'Ready',
            lastOperation: { operation: 'installed', lastUpdateTime: '2026-01-01T00:00:00Z' },
            conditions: [
              {
                type: 'Installation',
                status: 'True',
                reason: 'Ready',
                message: 'installed',
                lastTransitionTime: '2026-01-01T00:00:00Z',
              },
            ],
            synced: [
              { group: 'apps', version: 'v1', kind: 'Deployment', namespace: 'kyma-system', name: 'other' },
            ],
          },
        },
      ],
    });
    await createModuleConfig('beta-other', labels, 'beta', 'other');
    const stored = {
      manifest: parseManifest(
        await api.getNamespacedCustomObject({ ...kind('manifest'), name: 'beta-other' }),
        'Manifest',
      ),
      moduleConfig: parseModuleConfig(
        await api.getNamespacedCustomObject({ ...kind('moduleConfig'), name: 'beta-other' }),
        'ModuleConfig',
      ),
    };
    const cached = () => ({
      manifest: controller.caches.manifests!('beta')?.[0] as Record<string, unknown> | undefined,
      moduleConfig: controller.caches.moduleConfigs('beta')?.[0] as Record<string, unknown> | undefined,
    });
    await waitUntil(
      'both caches hold the stored versions',
      () =>
        stored.manifest.metadata.resourceVersion ===
          (cached().manifest?.['metadata'] as { resourceVersion?: string } | undefined)?.resourceVersion &&
        stored.moduleConfig.metadata.resourceVersion ===
          (cached().moduleConfig?.['metadata'] as { resourceVersion?: string } | undefined)?.resourceVersion,
    );
    // Exactly the reconciler's parse of what the API server stores: nothing a pass reads is trimmed away.
    expect(cached().manifest).to.deep.equal(stored.manifest);
    expect(cached().moduleConfig).to.deep.equal(stored.moduleConfig);
    // And the very objects the passes read, not a parsed copy beside each cached object.
    const ctx = { namespace, caches: controller.caches } as unknown as ReconcileContext;
    expect((await manifestsOf(ctx, 'beta')).get('beta-other')).to.equal(cached().manifest);
    expect((await moduleConfigsOf(ctx, 'beta')).get('other')).to.equal(cached().moduleConfig);
  });

  it('coalesces a burst of listener events for one Kyma into few reconciles', async () => {
    const keys = await keysAfter(async () => {
      for (let i = 0; i < 1_000; i++) controller.enqueue(`${namespace}/beta`);
    }, [`${namespace}/beta`]);
    expect(keys).to.deep.equal([`${namespace}/beta`]);
  });

  it('requeues a Kyma after the interval the reconciler answered', async () => {
    answer = { requeueAfterMs: 300 };
    const from = reconciled.length;
    controller.enqueue(`${namespace}/gamma`);
    await waitUntil(
      'gamma is reconciled again by its own requeue',
      () => reconciled.slice(from).filter((key) => key === `${namespace}/gamma`).length >= 3,
    );
    answer = {};
  });
});
