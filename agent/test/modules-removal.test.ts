// A module being removed, and a module whose access is taken away, behave as upstream lifecycle-manager's e2e
// scenarios expect, on a real KCP, a real SKR and a real registry:
//   modulereleasemeta-upgrade-under-deletion    a disabled module whose default CR a user's finalizer holds follows
//                                               its channel: the new version replaces the old operator, the Manifest
//                                               stays Deleting, the removal finishes once the finalizer goes;
//   module-api-upgrade-under-blocked-deletion   the same when the new CRD serves a new version and moves storage
//                                               while a v1alpha1 CR blocks;
//   non-blocking-deletion                       a deleting module enabled again in another channel gets that version
//                                               at once, and a fresh Manifest once the old one is gone;
//   restricted modules                          a kymaSelector that stops selecting the Kyma removes the module and
//                                               leaves the Kyma Error in upstream's words; --restricted-default-modules
//                                               offers a module without a selector to nobody.
import { expect } from 'chai';
import { CoreV1Api } from '@kubernetes/client-node';
import { GROUP, KINDS } from '@skr-watcher/api';
import { agentConfigFromFlags, ConfigError } from '../src/config.js';
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

/** Upstream's status text of a module the Kyma may not use, as its e2e tests compare it. */
const NOT_ALLOWED = {
  any: 'module template not allowed',
  restricted: 'module template not allowed: restricted module not allowed for this Kyma',
};

describe('module removal and access revocation as upstream lifecycle-manager', function () {
  this.timeout(300_000);
  const suite = moduleSuite();
  const { planes } = suite;
  const skrCore = () => planes.skr.makeApiClient(CoreV1Api);
  const configMap = (name: string) =>
    getOrUndefined(() => skrCore().readNamespacedConfigMap({ name, namespace: 'kyma-system' }));

  /** Module names are lower-case letters (the ModuleTemplate's pattern): one suffix per test. */
  const unique = (base: string) =>
    `${base}-${String.fromCharCode(97 + (suite.state.counter % 26)).repeat(3)}${process.pid
      .toString(26)
      .replace(/[0-9]/g, (d) => String.fromCharCode(107 + Number(d)))}`;
  const kindOf = moduleKind;
  /** The default CR `<module>-default` in kyma-system, read in `version`. */
  const defaultCr = (module: string, version = 'v1') => {
    const { group, plural } = kindOf(module);
    return getOrUndefined(() =>
      custom(planes.skr).getNamespacedCustomObject({
        group,
        version,
        plural,
        namespace: 'kyma-system',
        name: `${module}-default`,
      }),
    ) as Promise<Json | undefined>;
  };
  const defaultCrYaml = (module: string, version = 'v1') => {
    const { group, kind } = kindOf(module);
    return `apiVersion: ${group}/${version}\nkind: ${kind}\nmetadata:\n  name: ${module}-default\n  namespace: kyma-system\nspec:\n  greeting: hello\n`;
  };
  /** A module version whose "operator" is a ConfigMap named after the version, so an upgrade replaces it. */
  const publishVersion = (
    module: string,
    version: string,
    options: { crdVersions?: string[]; crVersion?: string; channels?: string[] } = {},
  ) => {
    const { group, kind } = kindOf(module);
    const crdVersions = options.crdVersions ?? ['v1'];
    return suite.publish({
      moduleName: module,
      version,
      ...(options.channels ? { channels: options.channels } : {}),
      rawManifest: docs(
        crdYaml(group, kind, crdVersions),
        configMapYaml(operatorOf(module, version), 'kyma-system'),
      ),
      defaultCr: defaultCrYaml(module, options.crVersion ?? crdVersions[crdVersions.length - 1]),
    });
  };
  const operatorOf = (module: string, version: string) => `${module}-operator-${version.replace(/\./g, '-')}`;

  /** The ModuleReleaseMeta of `module` with these channels (and kymaSelector), as the catalog's owner applies it. */
  const releaseMeta = (module: string, channels: Record<string, string>, kymaSelector?: Json) =>
    suite.applyCatalog({
      apiVersion: `${GROUP}/${KINDS.moduleReleaseMeta.version}`,
      kind: KINDS.moduleReleaseMeta.kind,
      metadata: { name: module, namespace: suite.state.ns },
      spec: {
        moduleName: module,
        ocmComponentName: `kyma-project.io/module/${module}`,
        channels: Object.entries(channels).map(([channel, version]) => ({ channel, version })),
        ...(kymaSelector ? { kymaSelector } : {}),
      },
    } as { kind: string; metadata: { name: string } });

  /** A user's finalizer on the default CR (in `version`): the removal waits for it. */
  const holdDefaultCr = async (module: string, finalizers: string[], version = 'v1') => {
    const { group, plural } = kindOf(module);
    await custom(planes.skr).patchNamespacedCustomObject(
      {
        group,
        version,
        plural,
        namespace: 'kyma-system',
        name: `${module}-default`,
        body: { metadata: { finalizers } },
      },
      mergePatch,
    );
  };
  const onlyManifest = async () => {
    const manifests = await suite.manifests();
    expect(manifests, 'one Manifest').to.have.length.at.most(1);
    return manifests[0];
  };
  const kymaState = async (name: string) => (await suite.kcpKyma(name)).status?.state as string | undefined;

  /** Enables `module`, waits for Ready, holds its default CR with a finalizer and disables it: Deleting. */
  async function installThenDisableHeld(kymaName: string, module: string, crVersion = 'v1') {
    await suite.kyma(kymaName, [{ name: module }]);
    await suite.start();
    await suite.reconcileUntil(
      kymaName,
      async () => (await suite.moduleStatus(kymaName, module))?.state === 'Ready',
      'module Ready',
    );
    await holdDefaultCr(module, ['blocking-finalizer'], crVersion);
    await suite.skrModules([]);
    await suite.reconcileUntil(
      kymaName,
      async () =>
        (await onlyManifest())?.status?.state === 'Deleting' &&
        (await defaultCr(module, crVersion))?.metadata.deletionTimestamp !== undefined,
      'Manifest Deleting, its default CR held',
    );
    expect(await kymaState(kymaName)).to.equal('Processing');
    expect((await suite.moduleStatus(kymaName, module))?.state).to.equal('Deleting');
  }

  /** Reconciles until the 2.0.0 operator is in the SKR and the 1.0.0 one is gone. */
  const untilOperatorReplaced = (kymaName: string, module: string) =>
    suite
      .reconcileUntil(
        kymaName,
        async () =>
          (await configMap(operatorOf(module, '2.0.0'))) !== undefined &&
          (await configMap(operatorOf(module, '1.0.0'))) === undefined,
        'the 2.0.0 operator applied and the 1.0.0 one gone',
      )
      .catch(async (error: Error) => {
        const manifest = await onlyManifest();
        throw new Error(
          `${error.message}; Manifest ${manifest?.spec.version} ${manifest?.status?.state}: ${manifest?.status?.lastOperation?.operation}`,
        );
      });

  /** Lets go of the default CR and waits until the module and its Manifest are gone; the Kyma is Ready. */
  async function releaseAndFinish(kymaName: string, module: string, crVersion = 'v1') {
    await holdDefaultCr(module, [], crVersion);
    await suite.reconcileUntil(
      kymaName,
      async () => (await suite.manifests()).length === 0 && !(await suite.moduleStatus(kymaName, module)),
      'module removed',
    );
    expect(await defaultCr(module, crVersion)).to.equal(undefined);
    expect(await kymaState(kymaName)).to.equal('Ready');
  }

  it('modulereleasemeta-upgrade-under-deletion: a module held in removal follows its channel; the new operator replaces the old, the Manifest stays Deleting until the user lets go', async function () {
    const module = unique('frozen');
    await publishVersion(module, '1.0.0');
    await installThenDisableHeld('k1', module);
    expect(await configMap(operatorOf(module, '1.0.0')), 'the operator stays while held').to.not.equal(
      undefined,
    );

    await publishVersion(module, '2.0.0');
    await untilOperatorReplaced('k1', module);
    const manifest = (await onlyManifest())!;
    expect(manifest.spec.version).to.equal('2.0.0');
    expect(manifest.metadata.deletionTimestamp).to.be.a('string');
    expect(manifest.status.state).to.equal('Deleting');
    expect(manifest.status.synced.map((s: Json) => s.name)).to.include(operatorOf(module, '2.0.0'));
    const entry = await suite.moduleStatus('k1', module);
    expect(entry).to.include({ version: '2.0.0', state: 'Deleting' });
    expect(await kymaState('k1')).to.equal('Processing');
    // Another pass: still held, still Deleting, nothing written back to the old version.
    await suite.state.manager!.reconciler.reconcile(`${suite.state.ns}/k1`);
    expect((await onlyManifest())?.status.state).to.equal('Deleting');
    expect((await defaultCr(module))?.metadata.deletionTimestamp).to.be.a('string');

    await releaseAndFinish('k1', module);
    expect(await configMap(operatorOf(module, '2.0.0'))).to.equal(undefined);
  });

  it('module-api-upgrade-under-blocked-deletion: a new CRD version with moved storage is applied while a v1alpha1 CR blocks the removal', async function () {
    const module = unique('storage');
    const { group, plural } = kindOf(module);
    await publishVersion(module, '1.0.0', { crdVersions: ['v1alpha1'] });
    await installThenDisableHeld('k2', module, 'v1alpha1');

    await publishVersion(module, '2.0.0', { crdVersions: ['v1alpha1', 'v1beta1'] });
    await untilOperatorReplaced('k2', module);
    const crd = (await custom(planes.skr).getClusterCustomObject({
      group: 'apiextensions.k8s.io',
      version: 'v1',
      plural: 'customresourcedefinitions',
      name: `${plural}.${group}`,
    })) as Json;
    expect(crd.spec.versions.map((v: Json) => `${v.name}:${v.served}:${v.storage}`)).to.deep.equal([
      'v1alpha1:true:false',
      'v1beta1:true:true',
    ]);
    const manifest = (await onlyManifest())!;
    expect(manifest.spec.resource.apiVersion).to.equal(`${group}/v1beta1`);
    expect(manifest.status.state).to.equal('Deleting');
    // The user's CR is one object, read in either version, still held.
    expect((await defaultCr(module, 'v1alpha1'))?.metadata.deletionTimestamp).to.be.a('string');
    expect((await defaultCr(module, 'v1beta1'))?.metadata.finalizers).to.deep.equal(['blocking-finalizer']);
    expect(await kymaState('k2')).to.equal('Processing');

    await releaseAndFinish('k2', module, 'v1alpha1');
    expect(await configMap(operatorOf(module, '2.0.0'))).to.equal(undefined);
  });

  it('non-blocking-deletion: a deleting module enabled again in another channel gets that version at once, and a fresh Manifest once the old one is gone', async function () {
    const module = unique('again');
    await publishVersion(module, '1.0.0');
    await publishVersion(module, '2.0.0', { channels: ['fast'] });
    await releaseMeta(module, { regular: '1.0.0', fast: '2.0.0' });
    await installThenDisableHeld('k3', module);
    const deleting = (await onlyManifest())!;

    await suite.skrModules([{ name: module, channel: 'fast' }]);
    await untilOperatorReplaced('k3', module);
    const upgraded = (await onlyManifest())!;
    expect(upgraded.metadata.uid, 'the same, deleting Manifest').to.equal(deleting.metadata.uid);
    expect(upgraded.spec.version).to.equal('2.0.0');
    expect(upgraded.status.state).to.equal('Deleting');
    expect((await defaultCr(module))?.metadata.deletionTimestamp).to.be.a('string');

    await holdDefaultCr(module, []);
    await suite.reconcileUntil(
      'k3',
      async () => {
        const manifest = await onlyManifest();
        return (
          manifest !== undefined &&
          manifest.metadata.uid !== deleting.metadata.uid &&
          manifest.status?.state === 'Ready' &&
          (await suite.moduleStatus('k3', module))?.state === 'Ready'
        );
      },
      'a fresh Manifest Ready',
    );
    const fresh = (await onlyManifest())!;
    expect(fresh.metadata.deletionTimestamp).to.equal(undefined);
    expect(fresh.spec.version).to.equal('2.0.0');
    const cr = await defaultCr(module);
    expect(cr, 'a new default CR').to.not.equal(undefined);
    expect(cr?.metadata.deletionTimestamp).to.equal(undefined);
    expect(await configMap(operatorOf(module, '2.0.0'))).to.not.equal(undefined);
    expect(await suite.moduleStatus('k3', module)).to.include({ version: '2.0.0', channel: 'fast' });
    expect(await kymaState('k3')).to.equal('Ready');
  });

  it('restricted module: a kymaSelector that stops selecting the Kyma removes the module from the SKR and leaves the Kyma Error in upstream words', async function () {
    const module = unique('gated');
    const gold = { matchLabels: { 'kyma-project.io/global-account-id': 'gold' } };
    await publishVersion(module, '1.0.0');
    await releaseMeta(module, { regular: '1.0.0' }, gold);
    await suite.kyma('k4', [{ name: module }]);
    await suite
      .api()
      .patchNamespacedCustomObject(
        { ...kymaRef(suite.state.ns, 'k4'), body: { metadata: { labels: gold.matchLabels } } },
        mergePatch,
      );
    await suite.start({ settings: { ...suite.settings(), restrictedModules: [module] } });
    await suite.reconcileUntil(
      'k4',
      async () => (await suite.moduleStatus('k4', module))?.state === 'Ready',
      'module Ready where the selector selects the Kyma',
    );
    expect(await configMap(operatorOf(module, '1.0.0'))).to.not.equal(undefined);

    await releaseMeta(
      module,
      { regular: '1.0.0' },
      {
        matchLabels: { 'kyma-project.io/global-account-id': 'silver' },
      },
    );
    await suite.reconcileUntil(
      'k4',
      async () => (await suite.manifests()).length === 0 && (await kymaState('k4')) === 'Error',
      'module removed, Kyma Error',
    );
    expect(await configMap(operatorOf(module, '1.0.0'))).to.equal(undefined);
    expect(await defaultCr(module)).to.equal(undefined);
    expect(await suite.moduleStatus('k4', module)).to.include({
      state: 'Error',
      message: NOT_ALLOWED.restricted,
    });
    // The SKR Kyma shows the same entry (what upstream's e2e reads).
    const skrEntry = async () =>
      (
        (await custom(planes.skr).getNamespacedCustomObject(kymaRef('kyma-system', 'default'))) as Json
      ).status?.modules?.find((m: Json) => m.name === module) as Json | undefined;
    await suite.reconcileUntil(
      'k4',
      async () => (await skrEntry())?.message === NOT_ALLOWED.restricted,
      'the SKR Kyma reports the module not allowed',
    );
    expect(await skrEntry()).to.include({ state: 'Error' });
  });

  it('--restricted-default-modules: a listed module without a kymaSelector is offered to no Kyma; a module not listed is not affected', async function () {
    const closed = unique('closed');
    const open = unique('open');
    await publishVersion(closed, '1.0.0');
    await publishVersion(open, '1.0.0');
    await suite.kyma('k5', [{ name: closed }, { name: open }]);
    await suite.start({ settings: { ...suite.settings(), restrictedModules: [closed] } });
    await suite.reconcileUntil(
      'k5',
      async () => (await suite.moduleStatus('k5', open))?.state === 'Ready',
      'the open module Ready',
    );
    expect(await suite.moduleStatus('k5', closed)).to.include({ state: 'Error', message: NOT_ALLOWED.any });
    expect(
      (await suite.manifests()).map((m) => m.metadata.labels['operator.kyma-project.io/module-name']),
    ).to.deep.equal([open]);
    expect(await configMap(operatorOf(closed, '1.0.0'))).to.equal(undefined);
  });
});

describe('--restricted-default-modules', function () {
  it('is a comma-separated list of module names and needs --oci-registry-host', function () {
    const config = agentConfigFromFlags(
      testRunFlags('kcp-system', {
        ociRegistryHost: 'registry.test',
        restrictedDefaultModules: 'deployer, some-restricted-module',
      }),
    );
    expect(config.modules?.restrictedModules).to.deep.equal(['deployer', 'some-restricted-module']);
    expect(() =>
      agentConfigFromFlags(testRunFlags('kcp-system', { restrictedDefaultModules: 'deployer' })),
    ).to.throw(ConfigError, /--restricted-default-modules needs --oci-registry-host/);
    expect(() =>
      agentConfigFromFlags(
        testRunFlags('kcp-system', {
          ociRegistryHost: 'registry.test',
          restrictedDefaultModules: 'Not A Name',
        }),
      ),
    ).to.throw(ConfigError, /--restricted-default-modules: expected module names/);
  });
});
