// The Kyma side of module installation on a real KCP and SKR: with module installation on, one Manifest per wanted
// module (mandatory ones too), named, labelled, annotated and owned as upstream lifecycle-manager does, written only
// when it changes, deleted with the module, adopted when upstream wrote it; one module's registry failure fails that
// module only. The descriptor lookup is handed in (a factory, as the agent wires the registry client in).
import { readFile } from 'node:fs/promises';
import { expect } from 'chai';
import { CoreV1Api, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import { ANNOTATIONS, GROUP, KINDS, LABELS, MANIFEST, manifestName } from '@skr-watcher/api';
import { kubeConfigAsAgent } from '../../test/support/kcp-rbac.js';
import { type ModuleDescription, type ModuleInstallation } from '../src/reconcile/index.js';
import { createManager, type Manager } from '../src/manager/index.js';
import {
  custom,
  getOrUndefined,
  kcpAndSkrForSuite,
  kymaRef,
  refTo,
  untilInWatchCache,
} from './support/planes.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

const COMPONENT = (module: string) => `kyma-project.io/module/${module}`;

/** Counts lookups; a module named in `failing` fails as a registry would. */
function installation(failing = new Set<string>()): ModuleInstallation & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    describe(component, version): Promise<ModuleDescription> {
      asked.push(`${component}:${version}`);
      if ([...failing].some((module) => component === COMPONENT(module)))
        return Promise.reject(new Error(`registry: GET ${component}:${version}: 503 Service Unavailable`));
      return Promise.resolve({
        install: {
          name: MANIFEST.installName,
          source: {
            repo: 'registry.test/modules',
            name: component,
            ref: `sha256:${'a'.repeat(64)}`,
            type: 'oci-ref',
          },
        },
        localizedImages: [],
      });
    },
    // These tests look at the KCP side only.
    objects: () => Promise.resolve([]),
  };
}

describe('Manifests from the Kyma (module installation on)', function () {
  this.timeout(120_000);
  const planes = kcpAndSkrForSuite();
  let counter = 0;
  let ns: string;
  let manager: Manager | undefined;

  const api = () => custom(planes.kcp);
  const manifestsIn = async (namespace: string) =>
    (
      (await api().listNamespacedCustomObject({
        group: GROUP,
        version: KINDS.manifest.version,
        plural: KINDS.manifest.plural,
        namespace,
      })) as { items: Json[] }
    ).items;

  async function catalog(module: string, version: string, mandatory = false): Promise<void> {
    await api().createNamespacedCustomObject({
      ...refTo('moduleReleaseMeta', ns, module),
      body: {
        apiVersion: `${GROUP}/${KINDS.moduleReleaseMeta.version}`,
        kind: KINDS.moduleReleaseMeta.kind,
        metadata: { name: module, namespace: ns },
        spec: {
          moduleName: module,
          ocmComponentName: COMPONENT(module),
          ...(mandatory ? { mandatory: { version } } : { channels: [{ channel: 'regular', version }] }),
        },
      },
    });
    await api().createNamespacedCustomObject({
      ...refTo('moduleTemplate', ns, `${module}-${version}`),
      body: {
        apiVersion: `${GROUP}/${KINDS.moduleTemplate.version}`,
        kind: KINDS.moduleTemplate.kind,
        metadata: { name: `${module}-${version}`, namespace: ns },
        spec: {
          moduleName: module,
          version,
          ...(mandatory ? { mandatory: true } : {}),
          data: {
            apiVersion: `${GROUP}/${KINDS.sample.version}`,
            kind: KINDS.sample.kind,
            metadata: { name: `${module}-default`, namespace: 'kyma-system' },
            spec: { greeting: version },
          },
        },
      },
    });
  }

  async function kyma(name: string, modules: Json[]): Promise<Json> {
    const core = planes.kcp.makeApiClient(CoreV1Api);
    const secret = `kubeconfig-${name}`;
    await core.createNamespacedSecret({
      namespace: ns,
      body: {
        metadata: { name: secret, namespace: ns, labels: { [LABELS.kymaName]: name } },
        data: {
          config: Buffer.from(await readFile(planes.env.plane('skr1').kubeconfigPath)).toString('base64'),
        },
      },
    });
    await untilInWatchCache(() => core.listNamespacedSecret({ namespace: ns, resourceVersion: '0' }), secret);
    return (await api().createNamespacedCustomObject({
      ...kymaRef(ns, name),
      body: {
        apiVersion: `${GROUP}/${KINDS.kyma.version}`,
        kind: KINDS.kyma.kind,
        metadata: { name, namespace: ns, labels: { [LABELS.runtimeId]: name } },
        spec: { channel: 'regular', modules, sync: { moduleCatalog: false } },
      },
    })) as Json;
  }

  /** The SKR Kyma is the user's list once created; tests change modules there. */
  async function skrModules(modules: Json[]): Promise<void> {
    await custom(planes.skr).patchNamespacedCustomObject(
      { ...kymaRef('kyma-system', 'default'), body: { spec: { modules } } },
      mergePatch,
    );
  }

  async function start(
    modules: ModuleInstallation | undefined,
    kc: KubeConfig = planes.kcp,
  ): Promise<Manager> {
    manager = createManager({
      kcp: await kubeConfigAsAgent(kc, ns),
      namespace: ns,
      skrTimeoutMs: 5_000,
      ...(modules ? { modules } : {}),
    });
    return manager;
  }

  beforeEach(async function () {
    counter += 1;
    ns = `mk-${process.pid}-${counter}`;
    await planes.kcp.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: ns } } });
  });
  afterEach(async function () {
    await manager?.close();
    manager = undefined;
    await getOrUndefined(() =>
      custom(planes.skr).deleteNamespacedCustomObject(kymaRef('kyma-system', 'default')),
    );
  });

  it('writes one Manifest per module, mandatory ones too, in upstream shape, and points the status at it', async function () {
    await catalog('alpha', '1.0.0');
    await catalog('base', '2.0.0', true);
    const kcpKyma = await kyma('k1', [{ name: 'alpha' }]);
    const modules = installation();
    await (await start(modules)).reconciler.reconcile(`${ns}/k1`);

    const manifests = await manifestsIn(ns);
    expect(manifests.map((m) => m.metadata.name).sort()).to.deep.equal(
      [manifestName(COMPONENT('alpha'), 'k1', 'alpha'), manifestName(COMPONENT('base'), 'k1', 'base')].sort(),
    );
    const alpha = manifests.find((m) => m.metadata.labels[LABELS.moduleName] === 'alpha')!;
    expect(alpha.metadata.labels).to.include({
      [LABELS.kymaName]: 'k1',
      [LABELS.channel]: 'regular',
      [LABELS.managedBy]: 'lifecycle-manager',
    });
    expect(alpha.metadata.annotations).to.include({
      [ANNOTATIONS.ocmComponentName]: COMPONENT('alpha'),
      [ANNOTATIONS.fqdn]: COMPONENT('alpha'),
    });
    expect(alpha.metadata.ownerReferences).to.deep.equal([
      {
        apiVersion: `${GROUP}/v1beta2`,
        kind: 'Kyma',
        name: 'k1',
        uid: kcpKyma.metadata.uid,
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    expect(alpha.spec).to.deep.include({
      version: '1.0.0',
      remote: false,
      customResourcePolicy: 'CreateAndDelete',
    });
    expect(alpha.spec.install.source.name).to.equal(COMPONENT('alpha'));
    // The default CR keeps the template's name; a missing one would be the Manifest's name.
    expect(alpha.spec.resource.metadata).to.deep.equal({ name: 'alpha-default', namespace: 'kyma-system' });
    const base = manifests.find((m) => m.metadata.labels[LABELS.moduleName] === 'base')!;
    expect(base.metadata.labels[LABELS.mandatoryModule]).to.equal('true');
    expect(base.metadata.labels).not.to.have.property(LABELS.channel);

    const status = ((await api().getNamespacedCustomObject(kymaRef(ns, 'k1'))) as Json).status;
    const entry = status.modules.find((m: Json) => m.name === 'alpha');
    expect(entry.manifest).to.deep.include({ apiVersion: `${GROUP}/v1beta2`, kind: 'Manifest' });
    expect(entry.manifest.metadata.name).to.equal(alpha.metadata.name);
    expect(entry.version).to.equal('1.0.0');
    // The Manifest's reconcile ran in the same pass: an empty set is Ready at once, and the default CR was created
    // by it (upstream's field manager), not by the Kyma side.
    expect(entry.state).to.equal('Ready');
    const created = (await getOrUndefined(() =>
      custom(planes.skr).getNamespacedCustomObject(refTo('sample', 'kyma-system', 'alpha-default')),
    )) as Json | undefined;
    expect(created?.metadata.managedFields.map((f: Json) => f.manager)).to.deep.equal([
      MANIFEST.resourceFieldManager,
    ]);

    // A second pass rewrites nothing and asks the registry nothing.
    const asked = modules.asked.length;
    const versions = manifests.map((m) => m.metadata.resourceVersion).sort();
    await untilInWatchCache(async () => ({ items: await manifestsIn(ns) }) as never, alpha.metadata.name);
    await manager!.reconciler.reconcile(`${ns}/k1`);
    expect(modules.asked.length).to.equal(asked);
    expect((await manifestsIn(ns)).map((m) => m.metadata.resourceVersion).sort()).to.deep.equal(versions);
  });

  it('deletes the Manifest of a module that leaves the Kyma and keeps its entry until it is gone', async function () {
    await catalog('alpha', '1.0.0');
    await catalog('beta', '1.0.0');
    await kyma('k2', [{ name: 'alpha' }, { name: 'beta' }]);
    await (await start(installation())).reconciler.reconcile(`${ns}/k2`);
    expect(await manifestsIn(ns)).to.have.length(2);
    // A finalizer stands for the Manifest's own reconcile, which removes the module from the SKR first.
    const betaName = manifestName(COMPONENT('beta'), 'k2', 'beta');
    await api().patchNamespacedCustomObject(
      { ...refTo('manifest', ns, betaName), body: { metadata: { finalizers: ['test/hold'] } } },
      mergePatch,
    );
    await skrModules([{ name: 'alpha' }]);
    await manager!.reconciler.reconcile(`${ns}/k2`);
    const beta = (await api().getNamespacedCustomObject(refTo('manifest', ns, betaName))) as Json;
    expect(beta.metadata.deletionTimestamp).to.be.a('string');
    let status = ((await api().getNamespacedCustomObject(kymaRef(ns, 'k2'))) as Json).status;
    expect(status.modules.find((m: Json) => m.name === 'beta')?.state).to.equal('Deleting');
    expect(status.state).to.not.equal('Deleting');

    await api().patchNamespacedCustomObject(
      { ...refTo('manifest', ns, betaName), body: { metadata: { finalizers: null } } },
      mergePatch,
    );
    for (let attempt = 0; ; attempt++) {
      await manager!.reconciler.reconcile(`${ns}/k2`);
      status = ((await api().getNamespacedCustomObject(kymaRef(ns, 'k2'))) as Json).status;
      if (!status.modules.some((m: Json) => m.name === 'beta')) break;
      if (attempt > 50) throw new Error('the beta entry never left the status');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect((await manifestsIn(ns)).map((m) => m.metadata.labels[LABELS.moduleName])).to.deep.equal(['alpha']);
  });

  it('adopts a Manifest upstream wrote under the same name instead of writing a second one', async function () {
    await catalog('alpha', '1.0.0');
    await kyma('k3', [{ name: 'alpha' }]);
    const name = manifestName(COMPONENT('alpha'), 'k3', 'alpha');
    // As upstream lifecycle-manager left it: same name scheme, its field manager, its status.
    await api().createNamespacedCustomObject({
      ...refTo('manifest', ns, name),
      fieldManager: 'lifecycle-manager',
      body: {
        apiVersion: `${GROUP}/v1beta2`,
        kind: 'Manifest',
        metadata: {
          name,
          namespace: ns,
          labels: {
            [LABELS.kymaName]: 'k3',
            [LABELS.moduleName]: 'alpha',
            [LABELS.channel]: 'regular',
            [LABELS.managedBy]: 'lifecycle-manager',
          },
          annotations: { [ANNOTATIONS.ocmComponentName]: COMPONENT('alpha') },
        },
        spec: {
          remote: false,
          version: '1.0.0',
          install: {
            name: 'raw-manifest',
            source: { repo: 'upstream', name: COMPONENT('alpha'), ref: 'sha256:b', type: 'oci-ref' },
          },
        },
      },
    } as never);
    await api().patchNamespacedCustomObjectStatus(
      {
        ...refTo('manifest', ns, name),
        body: {
          status: {
            state: 'Ready',
            lastOperation: { operation: 'resources are ready', lastUpdateTime: new Date().toISOString() },
          },
        },
      },
      mergePatch,
    );
    await untilInWatchCache(async () => ({ items: await manifestsIn(ns) }) as never, name);
    const modules = installation();
    // The template generation the Kyma status recorded is what upstream saw: nothing to rewrite.
    await api().patchNamespacedCustomObjectStatus(
      {
        ...kymaRef(ns, 'k3'),
        body: {
          status: {
            state: 'Ready',
            modules: [
              {
                name: 'alpha',
                state: 'Ready',
                version: '1.0.0',
                template: {
                  apiVersion: `${GROUP}/v1beta2`,
                  kind: 'ModuleTemplate',
                  metadata: { name: 'alpha-1.0.0', namespace: ns, generation: 1 },
                },
              },
            ],
          },
        },
      },
      mergePatch,
    );
    await (await start(modules)).reconciler.reconcile(`${ns}/k3`);
    const manifests = await manifestsIn(ns);
    expect(manifests.map((m) => m.metadata.name)).to.deep.equal([name]);
    expect(modules.asked).to.deep.equal([]);
    const entry = ((await api().getNamespacedCustomObject(kymaRef(ns, 'k3'))) as Json).status.modules[0];
    expect(entry).to.deep.include({ name: 'alpha', state: 'Ready', version: '1.0.0' });
    expect(entry.manifest.metadata.name).to.equal(name);
  });

  it('fails only the module whose registry lookup fails; the other gets its Manifest', async function () {
    await catalog('alpha', '1.0.0');
    await catalog('broken', '1.0.0');
    await kyma('k4', [{ name: 'alpha' }, { name: 'broken' }]);
    await (await start(installation(new Set(['broken'])))).reconciler.reconcile(`${ns}/k4`);
    const status = ((await api().getNamespacedCustomObject(kymaRef(ns, 'k4'))) as Json).status;
    const broken = status.modules.find((m: Json) => m.name === 'broken');
    expect(broken.state).to.equal('Error');
    expect(broken.message).to.contain('503 Service Unavailable');
    expect(status.modules.find((m: Json) => m.name === 'alpha').manifest.metadata.name).to.equal(
      manifestName(COMPONENT('alpha'), 'k4', 'alpha'),
    );
    expect((await manifestsIn(ns)).map((m) => m.metadata.labels[LABELS.moduleName])).to.deep.equal(['alpha']);
  });

  it('writes no Manifest without module installation (the agent as before)', async function () {
    await catalog('alpha', '1.0.0');
    await kyma('k5', [{ name: 'alpha' }]);
    await (await start(undefined)).reconciler.reconcile(`${ns}/k5`);
    expect(await manifestsIn(ns)).to.deep.equal([]);
    const sample = await getOrUndefined(() =>
      custom(planes.skr).getNamespacedCustomObject(refTo('sample', 'kyma-system', 'alpha-default')),
    );
    expect(sample).to.not.equal(undefined);
    await custom(planes.skr).deleteNamespacedCustomObject(refTo('sample', 'kyma-system', 'alpha-default'));
  });
});
