// Parity with upstream lifecycle-manager's v1beta2 API on real control planes: upstream-shaped objects apply
// with strict field validation and read back unpruned, an upstream-shaped Kyma status round-trips, and the
// resolution rules (mandatory, beta, restricted, unmanaged, no default CR, no downgrade, missing release meta),
// the module catalog in the SKR and taking over Kymas upstream wrote, each reconciled for real.
import { readFile } from 'node:fs/promises';
import { expect } from 'chai';
import { CoreV1Api, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import { DEFAULTS, GROUP, KINDS, LABELS, REQUEUE_MS } from '@skr-watcher/api';
import { startEnvironment, type Environment } from '@skr-watcher/testenv';
import { parseAllDocuments } from 'yaml';
import { webhookConfigurationFor } from '../src/registration/webhook-configuration.js';
import { moduleConfigName } from '../src/reconcile/index.js';
import { createManager, type Manager } from '../src/manager/index.js';
import {
  custom,
  getOrUndefined,
  kymaRef,
  readCustom,
  refTo,
  untilCrdsServe,
  untilInWatchCache,
  wipeSkrKyma,
} from './support/planes.js';

type Json = Record<string, unknown>;
type Kind = keyof typeof KINDS;

const SKR_NS = DEFAULTS.skrNamespace;
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const FIXTURES = new URL('./fixtures/upstream-objects.yaml', import.meta.url);
const KIND_NAMES = new Map<string, Kind>((Object.keys(KINDS) as Kind[]).map((key) => [KINDS[key].kind, key]));

/** Every field of `expected` is in `actual` with the same value (the server may add defaults, never drop). */
function expectContains(actual: unknown, expected: unknown, path = ''): void {
  if (expected !== null && typeof expected === 'object') {
    expect(actual, `${path} missing`).to.be.an(Array.isArray(expected) ? 'array' : 'object');
    if (Array.isArray(expected))
      expect((actual as unknown[]).length, `${path} length`).to.equal(expected.length);
    for (const [key, value] of Object.entries(expected))
      expectContains((actual as Json)[key], value, `${path}.${key}`);
    return;
  }
  expect(actual, path).to.equal(expected);
}

let env: Environment;
let kcp: KubeConfig;
let skr: KubeConfig;
let counter = 0;
let currentNamespace = '';

const kcpApi = () => custom(kcp);
const skrApi = () => custom(skr);

async function create(kind: Kind, namespace: string, body: Json): Promise<Json> {
  const { group, version, plural } = refTo(kind, namespace, '');
  return (await kcpApi().createNamespacedCustomObject({
    group,
    version,
    plural,
    namespace,
    body: { apiVersion: `${GROUP}/${version}`, kind: KINDS[kind].kind, ...body },
    fieldValidation: 'Strict',
  })) as Json;
}

const read = readCustom;

/** A KCP namespace with the kubeconfig Secret of the one SKR this suite uses. */
async function kcpNamespace(): Promise<string> {
  counter += 1;
  const namespace = `parity-${process.pid}-${counter}`;
  const core = kcp.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: namespace } } });
  return namespace;
}

async function kubeconfigSecret(namespace: string, kyma: string): Promise<void> {
  const core = kcp.makeApiClient(CoreV1Api);
  const name = `kubeconfig-${kyma}`;
  await core.createNamespacedSecret({
    namespace,
    body: {
      metadata: { name, namespace, labels: { [LABELS.kymaName]: kyma } },
      stringData: { config: await readFile(env.plane('skr1').kubeconfigPath, 'utf8') },
    },
  });
  await untilInWatchCache(() => core.listNamespacedSecret({ namespace, resourceVersion: '0' }), name);
}

/** A module's ModuleReleaseMeta and one ModuleTemplate per version; `data: false` leaves the template without a default CR. */
async function catalogEntry(
  namespace: string,
  module: string,
  channels: Record<string, string>,
  options: { versions?: string[]; data?: boolean; meta?: Json; templateLabels?: Record<string, string> } = {},
): Promise<void> {
  await create('moduleReleaseMeta', namespace, {
    metadata: { name: module, namespace },
    spec: {
      moduleName: module,
      channels: Object.entries(channels).map(([channel, version]) => ({ channel, version })),
      ...options.meta,
    },
  });
  for (const version of options.versions ?? [...new Set(Object.values(channels))]) {
    await moduleTemplate(namespace, module, version, options);
  }
}

async function moduleTemplate(
  namespace: string,
  module: string,
  version: string,
  options: { data?: boolean; templateLabels?: Record<string, string>; mandatory?: boolean } = {},
): Promise<void> {
  await create('moduleTemplate', namespace, {
    metadata: { name: `${module}-${version}`, namespace, labels: options.templateLabels ?? {} },
    spec: {
      moduleName: module,
      version,
      ...(options.mandatory ? { mandatory: true } : {}),
      ...(options.data === false
        ? {}
        : {
            data: {
              apiVersion: `${GROUP}/${KINDS.sample.version}`,
              kind: KINDS.sample.kind,
              metadata: { name: module, namespace: SKR_NS },
              spec: { greeting: `hello from ${module} ${version}` },
            },
          }),
      descriptor: { component: { name: `kyma-project.io/module/${module}`, version } },
    },
  });
}

async function createKyma(namespace: string, name: string, spec: Json, labels: Json = {}): Promise<void> {
  await kubeconfigSecret(namespace, name);
  await create('kyma', namespace, {
    metadata: { name, namespace, labels: { [LABELS.runtimeId]: name, ...labels } },
    spec: { channel: 'regular', ...spec },
  });
}

async function kymaStatus(namespace: string, name: string) {
  const kyma = (await read(kcp, 'kyma', namespace, name)) as { status: Json } | undefined;
  return kyma?.status as { state: string; modules: Json[]; conditions: Json[]; activeChannel?: string };
}

const moduleOf = (status: { modules: Json[] }, name: string) =>
  status.modules.find((m) => m['name'] === name);
const skrKyma = refTo('kyma', SKR_NS, DEFAULTS.skrKymaName);

async function patchSkrKyma(body: Json): Promise<void> {
  await skrApi().patchNamespacedCustomObject({ ...skrKyma, body }, mergePatch);
}

/** Leaves the SKR as a fresh one: no Kyma, no Sample, no catalog copies. */
const wipeSkr = () => wipeSkrKyma(skr, SKR_NS);

describe('upstream API parity (real KCP and SKR)', function () {
  this.timeout(120_000);
  let manager: Manager;
  let ns: string;

  before(async function () {
    env = await startEnvironment({ planes: ['kcp', 'skr1'] });
    kcp = env.plane('kcp').kubeConfig();
    skr = env.plane('skr1').kubeConfig();
    await untilCrdsServe([kcp, skr]);
  });

  after(async function () {
    await env?.stop();
  });

  beforeEach(async function () {
    ns = await kcpNamespace();
    currentNamespace = ns;
    manager = createManager({ kcp, namespace: ns, skrTimeoutMs: 5_000 });
  });

  afterEach(async function () {
    await manager.close();
    await wipeSkr();
  });

  describe('CRDs', function () {
    it('apply upstream-shaped Kymas, ModuleReleaseMetas, ModuleTemplates and Watchers strictly and read them back unpruned', async function () {
      const documents = parseAllDocuments(await readFile(FIXTURES, 'utf8')).map((d) => d.toJS() as Json);
      expect(documents.length).to.be.greaterThan(7);
      for (const document of documents) {
        const kind = KIND_NAMES.get(document['kind'] as string)!;
        const metadata = document['metadata'] as Json;
        const name = metadata['name'] as string;
        const { group, version, plural } = refTo(kind, ns, '');
        await kcpApi().createNamespacedCustomObject({
          group,
          version,
          plural,
          namespace: ns,
          body: { ...document, metadata: { ...metadata, namespace: ns } },
          fieldValidation: 'Strict',
        });
        const back = await read(kcp, kind, ns, name);
        expectContains(back?.['spec'], document['spec'], `${document['kind'] as string} ${name} spec`);
        if (metadata['labels'])
          expectContains((back?.['metadata'] as Json)['labels'], metadata['labels'], `${name} labels`);
      }
      // Upstream's defaults: managed true, customResourcePolicy CreateAndDelete, beta and internal false.
      const kyma = await read(kcp, 'kyma', ns, 'every-module-field');
      const modules = (kyma?.['spec'] as { modules: Json[] }).modules;
      expect(modules[2]).to.deep.equal({
        name: 'btp-operator',
        managed: true,
        customResourcePolicy: 'CreateAndDelete',
      });
      const mandatory = await read(kcp, 'moduleReleaseMeta', ns, 'istio');
      expect(mandatory?.['spec']).to.include({ beta: false, internal: false });
    });

    it('refuse what upstream refuses: a ModuleReleaseMeta with both channels and mandatory, an unknown policy', async function () {
      const refused = async (kind: Kind, body: Json) => {
        try {
          await create(kind, ns, body);
        } catch (error) {
          return (error as { code?: number }).code;
        }
        return 'accepted';
      };
      expect(
        await refused('moduleReleaseMeta', {
          metadata: { name: 'both', namespace: ns },
          spec: { moduleName: 'both', channels: [], mandatory: { version: '1.0.0' } },
        }),
      ).to.equal(422);
      expect(
        await refused('kyma', {
          metadata: { name: 'bad-policy', namespace: ns },
          spec: { channel: 'regular', modules: [{ name: 'keda', customResourcePolicy: 'Sometimes' }] },
        }),
      ).to.equal(422);
      expect(
        await refused('kyma', {
          metadata: { name: 'unknown-field', namespace: ns },
          spec: { channel: 'regular', modules: [{ name: 'keda', colour: 'blue' }] },
        }),
      ).to.equal(400);
    });

    it('answer the short names mt and mrm', async function () {
      const { ApiextensionsV1Api } = await import('@kubernetes/client-node');
      const api = kcp.makeApiClient(ApiextensionsV1Api);
      const names = async (name: string) =>
        (await api.readCustomResourceDefinition({ name })).spec.names.shortNames ?? [];
      expect(await names(`moduletemplates.${GROUP}`)).to.deep.equal(['mt']);
      expect(await names(`modulereleasemetas.${GROUP}`)).to.deep.equal(['mrm']);
    });
  });

  describe('Kyma status in upstream shape', function () {
    const upstreamStatus = (namespace: string) => ({
      state: 'Ready',
      activeChannel: 'regular',
      lastOperation: { operation: 'kyma is ready', lastUpdateTime: '2026-01-02T03:04:05Z' },
      conditions: [
        ...['Modules', 'ModuleCatalog', 'SKRWebhook'].map((type) => ({
          type,
          status: 'True',
          reason: 'Ready',
          message: 'all modules are in ready state',
          lastTransitionTime: '2026-01-02T03:04:05Z',
          observedGeneration: 1,
        })),
      ],
      modules: [
        {
          name: 'sample',
          fqdn: 'kyma-project.io/module/sample',
          ocmComponentName: 'kyma-project.io/module/sample',
          channel: 'regular',
          version: '1.0.0',
          state: 'Ready',
          message: 'installed',
          maintenance: false,
          manifest: {
            apiVersion: `${GROUP}/v1beta2`,
            kind: 'Manifest',
            metadata: { name: 'kyma-sample-123', namespace, generation: 2 },
          },
          resource: {
            apiVersion: `${GROUP}/v1alpha1`,
            kind: 'Sample',
            metadata: { name: 'sample', namespace: SKR_NS, generation: 1 },
          },
          template: {
            apiVersion: `${GROUP}/v1beta2`,
            kind: 'ModuleTemplate',
            metadata: { name: 'sample-1.0.0', namespace, generation: 1 },
          },
        },
      ],
    });

    async function writeUpstreamStatus(name: string): Promise<Json> {
      const status = upstreamStatus(ns);
      await kcpApi().patchNamespacedCustomObjectStatus(
        {
          ...kymaRef(ns, name),
          body: { apiVersion: `${GROUP}/v1beta2`, kind: 'Kyma', metadata: { name, namespace: ns }, status },
          fieldManager: 'lifecycle-manager',
          fieldValidation: 'Strict',
        },
        setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
      );
      return status;
    }

    it('round-trips an upstream-shaped status through /status unchanged', async function () {
      await create('kyma', ns, {
        metadata: { name: 'round-trip', namespace: ns },
        spec: { channel: 'regular' },
      });
      const written = await writeUpstreamStatus('round-trip');
      const back = await read(kcp, 'kyma', ns, 'round-trip');
      expect(back?.['status']).to.deep.equal(written);
    });

    it('takes over a Kyma upstream wrote (its labels, finalizer and status) and ends Ready with the same shape', async function () {
      const component = 'kyma-project.io/module/sample';
      await catalogEntry(ns, 'sample', { regular: '1.0.0' }, { meta: { ocmComponentName: component } });
      await createKyma(
        ns,
        'taken-over',
        { modules: [{ name: 'sample' }] },
        { [LABELS.managedBy]: 'lifecycle-manager', 'kyma-project.io/global-account-id': 'ga' },
      );
      await kcpApi().patchNamespacedCustomObject(
        {
          ...kymaRef(ns, 'taken-over'),
          body: { metadata: { finalizers: ['operator.kyma-project.io/Kyma'] } },
        },
        mergePatch,
      );
      await writeUpstreamStatus('taken-over');
      // The SKR Kyma upstream created, labelled for upstream's cache but not for the Watcher.
      await getOrUndefined(() =>
        skr.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: SKR_NS } } }),
      ).catch((error: { code?: number }) => {
        if (error.code !== 409) throw error;
      });
      await skrApi().createNamespacedCustomObject({
        ...skrKyma,
        body: {
          apiVersion: `${GROUP}/v1beta2`,
          kind: 'Kyma',
          metadata: {
            name: skrKyma.name,
            namespace: SKR_NS,
            labels: { [LABELS.managedBy]: 'lifecycle-manager' },
          },
          spec: { channel: 'regular', modules: [{ name: 'sample' }] },
        },
      });
      await create('watcher', ns, {
        metadata: {
          name: 'kyma-watcher',
          namespace: ns,
          labels: { [LABELS.managedBy]: 'lifecycle-manager' },
        },
        spec: {
          labelsToWatch: { [LABELS.watchedBy]: 'lifecycle-manager' },
          resourceToWatch: { group: GROUP, version: '*', resource: 'kymas' },
          field: 'spec',
          serviceInfo: { name: 'klm-event-service', port: 8082, namespace: ns },
          gateway: { selector: { matchLabels: { 'operator.kyma-project.io/watcher-gateway': 'default' } } },
        },
      });

      expect(await manager.reconciler.reconcile(`${ns}/taken-over`)).to.deep.equal({
        requeueAfterMs: REQUEUE_MS.Ready,
      });
      const status = await kymaStatus(ns, 'taken-over');
      expect(status.state).to.equal('Ready');
      expect(status.activeChannel).to.equal('regular');
      const sample = moduleOf(status, 'sample')!;
      expect(sample).to.include({ name: 'sample', channel: 'regular', version: '1.0.0', state: 'Ready' });
      expect(sample).to.include({ fqdn: component, ocmComponentName: component });
      expect(sample['template']).to.deep.equal({
        apiVersion: `${GROUP}/v1beta2`,
        kind: 'ModuleTemplate',
        metadata: { name: 'sample-1.0.0', namespace: ns, generation: 1 },
      });
      expect(sample['resource']).to.deep.equal({
        apiVersion: `${GROUP}/v1alpha1`,
        kind: 'Sample',
        metadata: { name: 'sample', namespace: SKR_NS },
      });
      const modules = status.conditions.find((c) => c['type'] === 'Modules');
      expect(modules).to.include({ status: 'True', observedGeneration: 1 });
      expect(status.conditions.find((c) => c['type'] === 'ModuleCatalog')).to.include({ status: 'True' });
      const labels = ((await read(skr, 'kyma', SKR_NS, skrKyma.name))?.['metadata'] as Json)[
        'labels'
      ] as Json;
      // The Watcher's label, and upstream's managed-by and the account it copies from the KCP Kyma.
      expect(labels).to.include({
        [LABELS.watchedBy]: 'lifecycle-manager',
        [LABELS.managedBy]: 'kyma',
        [LABELS.globalAccountId]: 'ga',
      });
      // A second pass finds nothing to change.
      const before = (await read(kcp, 'kyma', ns, 'taken-over'))?.['metadata'] as Json;
      await manager.reconciler.reconcile(`${ns}/taken-over`);
      const after = (await read(kcp, 'kyma', ns, 'taken-over'))?.['metadata'] as Json;
      expect(after['resourceVersion']).to.equal(before['resourceVersion']);
    });
  });

  describe('resolution rules', function () {
    it('installs a mandatory module in a Kyma that does not list it', async function () {
      await catalogEntry(ns, 'sample', { regular: '1.0.0' });
      await create('moduleReleaseMeta', ns, {
        metadata: { name: 'guard', namespace: ns },
        spec: { moduleName: 'guard', mandatory: { version: '2.0.0' } },
      });
      await moduleTemplate(ns, 'guard', '2.0.0', { mandatory: true });
      await createKyma(ns, 'kyma-mandatory', { modules: [{ name: 'sample' }] });

      expect(await manager.reconciler.reconcile(`${ns}/kyma-mandatory`)).to.deep.equal({
        requeueAfterMs: REQUEUE_MS.Ready,
      });
      const status = await kymaStatus(ns, 'kyma-mandatory');
      expect(moduleOf(status, 'guard')).to.include({ version: '2.0.0', state: 'Ready' });
      const guard = await read(skr, 'sample', SKR_NS, 'guard');
      expect((guard?.['spec'] as Json)['greeting']).to.equal('hello from guard 2.0.0');
    });

    it('refuses a beta module to a Kyma not labelled beta, and installs it once labelled', async function () {
      await catalogEntry(ns, 'sample', { regular: '1.0.0' }, { meta: { beta: true } });
      await createKyma(ns, 'kyma-beta', { modules: [{ name: 'sample' }] });

      expect(await manager.reconciler.reconcile(`${ns}/kyma-beta`)).to.deep.equal({
        requeueAfterMs: REQUEUE_MS.Error,
      });
      let status = await kymaStatus(ns, 'kyma-beta');
      expect(moduleOf(status, 'sample')).to.include({ state: 'Error' });
      expect(moduleOf(status, 'sample')?.['message']).to.equal('module template not allowed: beta module');
      expect(await read(skr, 'sample', SKR_NS, 'sample')).to.equal(undefined);

      await kcpApi().patchNamespacedCustomObject(
        { ...kymaRef(ns, 'kyma-beta'), body: { metadata: { labels: { [LABELS.beta]: 'true' } } } },
        mergePatch,
      );
      await manager.reconciler.reconcile(`${ns}/kyma-beta`);
      status = await kymaStatus(ns, 'kyma-beta');
      expect(moduleOf(status, 'sample')).to.include({ state: 'Ready' });
    });

    it('refuses an internal template to a Kyma not labelled internal', async function () {
      await catalogEntry(
        ns,
        'sample',
        { regular: '1.0.0' },
        { templateLabels: { [LABELS.internal]: 'true' } },
      );
      await createKyma(ns, 'kyma-internal', { modules: [{ name: 'sample' }] });
      await manager.reconciler.reconcile(`${ns}/kyma-internal`);
      const status = await kymaStatus(ns, 'kyma-internal');
      expect(moduleOf(status, 'sample')?.['message']).to.equal(
        'module template not allowed: internal module',
      );
    });

    it('opens a restricted module (kymaSelector) only to the Kymas it selects', async function () {
      await catalogEntry(
        ns,
        'sample',
        { regular: '1.0.0' },
        {
          meta: {
            kymaSelector: {
              matchExpressions: [
                { key: 'kyma-project.io/global-account-id', operator: 'In', values: ['gold'] },
              ],
            },
          },
        },
      );
      await createKyma(
        ns,
        'kyma-restricted',
        { modules: [{ name: 'sample' }] },
        {
          'kyma-project.io/global-account-id': 'bronze',
        },
      );
      await manager.reconciler.reconcile(`${ns}/kyma-restricted`);
      let status = await kymaStatus(ns, 'kyma-restricted');
      expect(moduleOf(status, 'sample')?.['message']).to.equal(
        'module template not allowed: restricted module not allowed for this Kyma',
      );

      await kcpApi().patchNamespacedCustomObject(
        {
          ...kymaRef(ns, 'kyma-restricted'),
          body: { metadata: { labels: { 'kyma-project.io/global-account-id': 'gold' } } },
        },
        mergePatch,
      );
      await manager.reconciler.reconcile(`${ns}/kyma-restricted`);
      status = await kymaStatus(ns, 'kyma-restricted');
      expect(moduleOf(status, 'sample')).to.include({ state: 'Ready' });
    });

    it('leaves an unmanaged module to the user: state Unmanaged, Module CR untouched and kept, no ModuleConfig', async function () {
      await catalogEntry(ns, 'sample', { regular: '1.0.0' });
      await createKyma(ns, 'kyma-unmanaged', { modules: [{ name: 'sample' }] });
      await manager.reconciler.reconcile(`${ns}/kyma-unmanaged`);
      const configRef = refTo('moduleConfig', ns, moduleConfigName('kyma-unmanaged', 'sample'));
      expect(await read(kcp, 'moduleConfig', ns, configRef.name)).to.not.equal(undefined);

      await patchSkrKyma({ spec: { modules: [{ name: 'sample', managed: false }] } });
      await skrApi().patchNamespacedCustomObject(
        { ...refTo('sample', SKR_NS, 'sample'), body: { spec: { greeting: 'mine now' } } },
        mergePatch,
      );
      expect(await manager.reconciler.reconcile(`${ns}/kyma-unmanaged`)).to.deep.equal({
        requeueAfterMs: REQUEUE_MS.Ready,
      });
      const status = await kymaStatus(ns, 'kyma-unmanaged');
      expect(moduleOf(status, 'sample')).to.include({ state: 'Unmanaged', version: '1.0.0' });
      expect(status.state).to.equal('Ready');
      expect(await read(kcp, 'moduleConfig', ns, configRef.name)).to.equal(undefined);

      // Dropped from the list while unmanaged: the user's Module CR stays.
      await patchSkrKyma({ spec: { modules: [] } });
      await manager.reconciler.reconcile(`${ns}/kyma-unmanaged`);
      const sample = await read(skr, 'sample', SKR_NS, 'sample');
      expect((sample?.['spec'] as Json)['greeting']).to.equal('mine now');
    });

    it('installs a module whose template has no default CR without one, Ready', async function () {
      await catalogEntry(ns, 'sample', { regular: '1.0.0' }, { data: false });
      await createKyma(ns, 'kyma-nodata', { modules: [{ name: 'sample' }] });
      expect(await manager.reconciler.reconcile(`${ns}/kyma-nodata`)).to.deep.equal({
        requeueAfterMs: REQUEUE_MS.Ready,
      });
      const status = await kymaStatus(ns, 'kyma-nodata');
      expect(moduleOf(status, 'sample')).to.include({ state: 'Ready', version: '1.0.0' });
      expect(moduleOf(status, 'sample')).to.not.have.property('resource');
      expect(await read(skr, 'sample', SKR_NS, 'sample')).to.equal(undefined);
      expect(await read(kcp, 'moduleConfig', ns, moduleConfigName('kyma-nodata', 'sample'))).to.equal(
        undefined,
      );
    });

    it('refuses a downgrade on a channel switch: Warning, the installed version stays', async function () {
      await catalogEntry(ns, 'sample', { regular: '1.0.0', fast: '1.1.0' });
      await createKyma(ns, 'kyma-downgrade', { channel: 'fast', modules: [{ name: 'sample' }] });
      await manager.reconciler.reconcile(`${ns}/kyma-downgrade`);
      expect(moduleOf(await kymaStatus(ns, 'kyma-downgrade'), 'sample')).to.include({ version: '1.1.0' });

      await patchSkrKyma({ spec: { channel: 'regular' } });
      expect(await manager.reconciler.reconcile(`${ns}/kyma-downgrade`)).to.deep.equal({
        requeueAfterMs: REQUEUE_MS.Warning,
      });
      const status = await kymaStatus(ns, 'kyma-downgrade');
      const sample = moduleOf(status, 'sample')!;
      expect(sample).to.include({ state: 'Warning', version: '1.1.0', channel: 'regular' });
      expect(sample['message']).to.match(/downgrades are refused/);
      expect(sample['template']).to.nested.include({ 'metadata.name': 'sample-1.1.0' });
      expect(status.activeChannel).to.equal('regular');
    });

    it('keeps the previous module status when its ModuleReleaseMeta goes: Error once, then Warning', async function () {
      await catalogEntry(ns, 'sample', { regular: '1.0.0' });
      await createKyma(ns, 'kyma-nomrm', { modules: [{ name: 'sample' }] });
      await manager.reconciler.reconcile(`${ns}/kyma-nomrm`);
      await kcpApi().deleteNamespacedCustomObject(refTo('moduleReleaseMeta', ns, 'sample'));

      await manager.reconciler.reconcile(`${ns}/kyma-nomrm`);
      let sample = moduleOf(await kymaStatus(ns, 'kyma-nomrm'), 'sample')!;
      expect(sample).to.include({ state: 'Error', version: '1.0.0' });
      expect(sample['message']).to.match(/^ModuleReleaseMetaNotFound/);
      expect(sample['template']).to.nested.include({ 'metadata.name': 'sample-1.0.0' });

      for (let pass = 0; pass < 2; pass++) {
        expect(await manager.reconciler.reconcile(`${ns}/kyma-nomrm`)).to.deep.equal({
          requeueAfterMs: REQUEUE_MS.Warning,
        });
        sample = moduleOf(await kymaStatus(ns, 'kyma-nomrm'), 'sample')!;
        expect(sample).to.include({ state: 'Warning', version: '1.0.0' });
      }
      expect(await read(skr, 'sample', SKR_NS, 'sample')).to.not.equal(undefined);
    });
  });

  describe('module catalog in the SKR', function () {
    it('copies what the Kyma may use and removes what it may no longer see', async function () {
      await catalogEntry(ns, 'sample', { regular: '1.0.0', fast: '1.1.0' });
      await catalogEntry(ns, 'trial', { regular: '1.0.0' }, { meta: { beta: true } });
      await moduleTemplate(ns, 'hidden', '1.0.0', { templateLabels: { [LABELS.sync]: 'false' } });
      await createKyma(ns, 'kyma-catalog', { modules: [{ name: 'sample' }] });

      await manager.reconciler.reconcile(`${ns}/kyma-catalog`);
      const names = async (kind: Kind) => {
        const { group, version, plural } = refTo(kind, SKR_NS, '');
        const list = (await skrApi().listNamespacedCustomObject({
          group,
          version,
          plural,
          namespace: SKR_NS,
        })) as {
          items: { metadata: { name: string } }[];
        };
        return list.items.map((item) => item.metadata.name).sort();
      };
      expect(await names('moduleTemplate')).to.deep.equal(['sample-1.0.0', 'sample-1.1.0']);
      expect(await names('moduleReleaseMeta')).to.deep.equal(['sample']);
      const copy = await read(skr, 'moduleTemplate', SKR_NS, 'sample-1.1.0');
      expect((copy?.['spec'] as Json)['version']).to.equal('1.1.0');
      const status = await kymaStatus(ns, 'kyma-catalog');
      expect(status.conditions.find((c) => c['type'] === 'ModuleCatalog')).to.include({ status: 'True' });

      // No longer visible: a template deleted in KCP, a module that turned beta.
      await kcpApi().deleteNamespacedCustomObject(refTo('moduleTemplate', ns, 'sample-1.1.0'));
      await kcpApi().patchNamespacedCustomObject(
        { ...refTo('moduleReleaseMeta', ns, 'trial'), body: { spec: { beta: false } } },
        mergePatch,
      );
      // The reconciler reads the catalog from the watch cache; wait until it has both changes.
      await untilCached(
        'moduleTemplate',
        (items) => !items.some((item) => item.metadata.name === 'sample-1.1.0'),
      );
      await untilCached('moduleReleaseMeta', (items) =>
        items.some((item) => item.metadata.name === 'trial' && item.spec?.['beta'] === false),
      );
      await manager.reconciler.reconcile(`${ns}/kyma-catalog`);
      expect(await names('moduleTemplate')).to.deep.equal(['sample-1.0.0', 'trial-1.0.0']);
      expect(await names('moduleReleaseMeta')).to.deep.equal(['sample', 'trial']);
    });
  });

  it('a Watcher without spec.manager calls back to the manager of its managed-by label', function () {
    const config = webhookConfigurationFor({
      watchers: [
        {
          apiVersion: `${GROUP}/v1beta2`,
          kind: 'Watcher',
          metadata: { name: 'upstream', namespace: 'kcp-system', labels: { [LABELS.managedBy]: 'klm-next' } },
          spec: {
            labelsToWatch: { [LABELS.watchedBy]: 'lifecycle-manager' },
            resourceToWatch: { group: GROUP, version: '*', resource: 'kymas' },
            field: 'spec',
          },
        },
      ],
      moduleResources: [],
      caBundlePem: 'x',
      target: { kind: 'url', baseUrl: 'https://127.0.0.1:9443' },
    });
    expect(config.webhooks?.[0]?.clientConfig.url).to.equal('https://127.0.0.1:9443/validate/klm-next');
  });
});

/** Waits until the KCP watch cache's list of a kind in this suite's namespace satisfies `done`. */
async function untilCached(
  kind: Kind,
  done: (items: { metadata: { name: string }; spec?: Json }[]) => boolean,
): Promise<void> {
  const namespace = currentNamespace;
  const { group, version, plural } = refTo(kind, namespace, '');
  for (let attempt = 0; attempt < 250; attempt++) {
    const { items } = (await kcpApi().listNamespacedCustomObject({
      group,
      version,
      plural,
      namespace,
      resourceVersion: '0',
    })) as { items: { metadata: { name: string }; spec?: Json }[] };
    if (done(items)) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`the watch cache of ${plural} never caught up`);
}
