// The deployer module's image pull Secret injection on a real KCP, a real SKR and a real registry, as upstream's two
// e2e targets run it: with `deployer` in --restricted-default-modules, a Secret of the deployer's raw manifest
// annotated inject-data-from-kcp is applied with the data of the KCP Secret of its name (labelled for the module),
// and a misconfigured KCP Secret is the Manifest's Error in upstream's words; any other module carrying the
// annotation gets its Secret as published.
import { expect } from 'chai';
import { CoreV1Api } from '@kubernetes/client-node';
import { ANNOTATIONS, LABELS } from '@skr-watcher/api';
import { createClusterClient, type ClusterClient } from '@skr-watcher/kube';
import type { ReconcileContext } from '../src/reconcile/context.js';
import { passInputsDigest, type PassInputs } from '../src/reconcile/kyma/pass-inputs.js';
import { getOrUndefined, kymaRef, refTo } from './support/planes.js';
import { docs, mergePatch, moduleSuite, type Json } from './support/modules.js';

/** The placeholder a module publishes in its pull Secret: an empty docker config. */
const PUBLISHED = Buffer.from('{"auths": {}}\n').toString('base64');
/** What the KCP keeps for the deployer: real registry credentials. */
const KCP_CREDENTIALS = Buffer.from(
  '{"auths":{"e2e-test.example.com":{"username":"test","password":"test"}}}\n',
).toString('base64');

const secretYaml = (name: string, inject: boolean) =>
  `apiVersion: v1\nkind: Secret\nmetadata:\n  name: ${name}\n  namespace: kyma-system\n` +
  (inject ? `  annotations:\n    ${ANNOTATIONS.injectDataFromKcp}: "true"\n` : '') +
  `type: kubernetes.io/dockerconfigjson\ndata:\n  .dockerconfigjson: ${PUBLISHED}\n`;

describe('deployer module image pull Secret injection (inject-data-from-kcp)', function () {
  this.timeout(300_000);
  const suite = moduleSuite();
  const { planes } = suite;
  const kcpCore = () => planes.kcp.makeApiClient(CoreV1Api);
  const skrSecretData = async (name: string) =>
    (
      await getOrUndefined(() =>
        planes.skr.makeApiClient(CoreV1Api).readNamespacedSecret({ name, namespace: 'kyma-system' }),
      )
    )?.data;
  const suffix = () => `${suite.state.counter}-${process.pid}`;
  /** The account label upstream's e2e selects its restricted modules by. */
  const account = { 'kyma-project.io/global-account-id': 'f6e5d4c3-b2a1-9087-6543-210fedcba987' };

  /** Publishes `module` with these Secrets, offered (restricted) only to the Kymas of `account`. */
  const publishRestricted = async (module: string, version: string, secrets: string[]) => {
    await suite.publish({ moduleName: module, version, rawManifest: docs(...secrets) });
    await suite.api().patchNamespacedCustomObject(
      {
        ...refTo('moduleReleaseMeta', suite.state.ns, module),
        body: { spec: { kymaSelector: { matchLabels: account } } },
      },
      mergePatch,
    );
  };
  /** A KCP Secret in the agent's namespace, labelled for `module` unless undefined. */
  const kcpSecret = (name: string, module: string | undefined) =>
    kcpCore().createNamespacedSecret({
      namespace: suite.state.ns,
      body: {
        metadata: { name, ...(module ? { labels: { [LABELS.moduleName]: module } } : {}) },
        type: 'kubernetes.io/dockerconfigjson',
        data: { '.dockerconfigjson': KCP_CREDENTIALS },
      },
    });
  const kymaOfAccount = async (name: string, modules: string[]) => {
    await suite.kyma(
      name,
      modules.map((module) => ({ name: module })),
    );
    await suite
      .api()
      .patchNamespacedCustomObject(
        { ...kymaRef(suite.state.ns, name), body: { metadata: { labels: account } } },
        mergePatch,
      );
  };
  const manifestOf = async (module: string) =>
    (await suite.manifests()).find((m: Json) => m.metadata.labels?.[LABELS.moduleName] === module);
  const untilReady = (kyma: string, modules: string[]) =>
    suite.reconcileUntil(
      kyma,
      async () => {
        for (const module of modules)
          if ((await suite.moduleStatus(kyma, module))?.state !== 'Ready') return false;
        return true;
      },
      `${modules.join(', ')} Ready`,
    );
  /** Reconciles until the deployer's Manifest is Error with `message` in its lastOperation. */
  const untilManifestError = (kyma: string, message: string) =>
    suite.reconcileUntil(
      kyma,
      async () => {
        const manifest = await manifestOf('deployer');
        return (
          manifest?.status?.state === 'Error' && manifest.status.lastOperation?.operation.includes(message)
        );
      },
      `deployer Manifest Error "${message}"`,
    );
  const { deleteKyma } = suite;
  /** The digest of the no-op rule for the Kyma's pass, its Manifests as a controller's cache holds them. */
  let kcpClient: ClusterClient | undefined;
  after(async function () {
    await kcpClient?.close();
  });
  const inputsDigestOf = async (kyma: string) => {
    const manifests = await suite.manifests();
    // One client for every digest: a rebuilt client is another input.
    kcpClient ??= await createClusterClient(planes.kcp);
    const ctx = {
      kcp: kcpClient,
      namespace: suite.state.ns,
      modules: suite.state.installation,
      caches: { manifests: () => manifests },
    } as unknown as ReconcileContext;
    const inputs = {
      kyma: await suite.kcpKyma(kyma),
      skrKyma: { metadata: { name: 'default' } },
      skr: ctx.kcp,
      catalog: { templates: [], metas: [] },
      watchers: [],
      configs: new Map(),
      syncs: [],
    } as unknown as PassInputs;
    return passInputsDigest(ctx, inputs);
  };

  it('deployer-module-image-pull-secret-injection: the annotated Secret holds the KCP data, the other keeps its own; a KCP Secret labelled for another module, unlabelled or gone is the Manifest Error in upstream words', async function () {
    const inject = `image-pull-secret-${suffix()}`;
    const keep = `non-inject-pull-secret-${suffix()}`;
    await publishRestricted('deployer', '1.0.0', [secretYaml(inject, true), secretYaml(keep, false)]);
    await kcpSecret(inject, 'deployer');
    // A KCP Secret of the same name as a Secret that is not annotated: nothing of it reaches the SKR.
    await kcpSecret(keep, 'deployer');
    await kymaOfAccount('k1', ['deployer']);
    await suite.start({ settings: { ...suite.settings(), restrictedModules: ['deployer'] } });
    await untilReady('k1', ['deployer']);

    expect(await skrSecretData(inject)).to.deep.equal({ '.dockerconfigjson': KCP_CREDENTIALS });
    expect(await skrSecretData(keep)).to.deep.equal({ '.dockerconfigjson': PUBLISHED });
    // The next pass keeps it so.
    await suite.state.manager!.reconciler.reconcile(`${suite.state.ns}/k1`);
    expect(await skrSecretData(inject)).to.deep.equal({ '.dockerconfigjson': KCP_CREDENTIALS });
    expect((await manifestOf('deployer'))?.status.state).to.equal('Ready');

    // A user's write to the Secret in the SKR is put back with the KCP's data by the targeted path of its callback.
    const skrCore = planes.skr.makeApiClient(CoreV1Api);
    const before = await skrCore.readNamespacedSecret({ name: inject, namespace: 'kyma-system' });
    await skrCore.replaceNamespacedSecret({
      name: inject,
      namespace: 'kyma-system',
      body: { ...before, data: { '.dockerconfigjson': PUBLISHED } },
    });
    await suite.state.manager!.targeted.objectChanged(`${suite.state.ns}/k1`, {
      gvk: { group: '', version: 'v1', kind: 'Secret' },
      namespace: 'kyma-system',
      name: inject,
      fingerprint: {
        uid: before.metadata!.uid!,
        previousResourceVersion: before.metadata!.resourceVersion!,
      },
    });
    expect(await skrSecretData(inject)).to.deep.equal({ '.dockerconfigjson': KCP_CREDENTIALS });

    // Credentials rotated in the KCP reach the SKR at the Kyma's next pass: they change the inputs of the no-op rule
    // (which lets a Ready Kyma of a controller rest), as the controller's caches give them.
    const digest = await inputsDigestOf('k1');
    expect(await inputsDigestOf('k1'), 'no change, same inputs').to.equal(digest);
    const rotated = Buffer.from('{"auths":{"e2e-test.example.com":{"auth":"eDp5"}}}\n').toString('base64');
    await kcpCore().patchNamespacedSecret(
      { name: inject, namespace: suite.state.ns, body: { data: { '.dockerconfigjson': rotated } } },
      mergePatch,
    );
    expect(await inputsDigestOf('k1'), 'rotated in the KCP').to.not.equal(digest);
    await suite.state.manager!.reconciler.reconcile(`${suite.state.ns}/k1`);
    expect(await skrSecretData(inject)).to.deep.equal({ '.dockerconfigjson': rotated });

    const failed = 'inject-data-from-kcp transform failed';
    await kcpCore().patchNamespacedSecret(
      {
        name: inject,
        namespace: suite.state.ns,
        body: { metadata: { labels: { [LABELS.moduleName]: 'not-deployer' } } },
      },
      mergePatch,
    );
    await untilManifestError(
      'k1',
      `${failed}: kcp source secret ${LABELS.moduleName} label does not match the manifest module`,
    );
    expect((await suite.moduleStatus('k1', 'deployer'))?.state).to.equal('Error');
    // Nothing of the other module's Secret reached the SKR: what was applied before stays.
    expect(await skrSecretData(inject)).to.deep.equal({ '.dockerconfigjson': rotated });

    await kcpCore().patchNamespacedSecret(
      {
        name: inject,
        namespace: suite.state.ns,
        body: { metadata: { labels: { [LABELS.moduleName]: null } } },
      },
      mergePatch,
    );
    await untilManifestError(
      'k1',
      `${failed}: kcp source secret is missing the required ${LABELS.moduleName} label`,
    );

    await kcpCore().deleteNamespacedSecret({ name: inject, namespace: suite.state.ns });
    await untilManifestError('k1', `${failed}: failed to fetch kcp secret "${inject}"`);

    await deleteKyma('k1');
    expect(await skrSecretData(inject)).to.equal(undefined);
  });

  it('block-non-deployer-module-image-pull-secret-injection: another restricted module carrying the annotation gets its Secret as published, while the deployer beside it is injected', async function () {
    const blocked = `image-pull-secret-${suffix()}`;
    const injected = `deployer-pull-secret-${suffix()}`;
    await publishRestricted('not-deployer', '1.0.0', [secretYaml(blocked, true)]);
    await publishRestricted('deployer', '2.0.0', [secretYaml(injected, true)]);
    // A KCP Secret that fits the not-deployer module in every way but its name.
    await kcpSecret(blocked, 'not-deployer');
    await kcpSecret(injected, 'deployer');
    await kymaOfAccount('k2', ['not-deployer', 'deployer']);
    await suite.start({ settings: { ...suite.settings(), restrictedModules: ['deployer', 'not-deployer'] } });
    await untilReady('k2', ['not-deployer', 'deployer']);

    expect(await skrSecretData(blocked)).to.deep.equal({ '.dockerconfigjson': PUBLISHED });
    expect(await skrSecretData(injected)).to.deep.equal({ '.dockerconfigjson': KCP_CREDENTIALS });
    await suite.state.manager!.reconciler.reconcile(`${suite.state.ns}/k2`);
    expect(await skrSecretData(blocked)).to.deep.equal({ '.dockerconfigjson': PUBLISHED });
    expect((await manifestOf('not-deployer'))?.status.state).to.equal('Ready');

    await deleteKyma('k2');
  });
});
