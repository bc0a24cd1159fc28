// Where a module's template and content come from, as upstream lifecycle-manager's e2e scenarios expect, on a real
// KCP, a real SKR and real registries:
//   modulereleasemeta-with-obsolete-moduletemplate   the ModuleReleaseMeta names a version whose ModuleTemplate
//                                                    `<module>-<version>` does not exist, only an obsolete template
//                                                    under the old `<module>-<channel>` name: the Kyma is Error and
//                                                    stays so, the module reports upstream's text, nothing installed;
//   module-transferred-to-another-oci-registry       the component version was transferred to another registry and
//                                                    repository, its images with it: the agent, pointed there by
//                                                    --oci-registry-host and --modules-repository-subpath, installs
//                                                    it, the Manifest lists the transferred images in
//                                                    spec.localizedImages, the workload's image and env values in
//                                                    the SKR name them, and the Kyma is Ready once it is available.
import { expect } from 'chai';
import { AppsV1Api } from '@kubernetes/client-node';
import { GROUP } from '@skr-watcher/api';
import { publishModule, registryConfigFromFlags, type ModuleVersion } from '@skr-watcher/oci';
import { startRegistry, type Registry } from '@skr-watcher/testenv';
import { getOrUndefined, refTo } from './support/planes.js';
import { configMapYaml, docs, mergePatch, moduleSuite, type Json } from './support/modules.js';

describe("module sources as upstream lifecycle-manager's e2e scenarios expect", function () {
  this.timeout(300_000);
  const suite = moduleSuite();
  const { planes } = suite;

  it('modulereleasemeta-with-obsolete-moduletemplate: the Kyma is Error and stays so, the module says its template was not found in upstream words', async function () {
    const module = 'obsolete';
    const published = await suite.publish({
      moduleName: module,
      version: '1.0.0',
      rawManifest: configMapYaml(`${module}-operator`, 'kyma-system'),
    });
    // Only an obsolete template is left: the old naming, one template per channel.
    const current = published.moduleTemplate.metadata.name;
    await suite.api().deleteNamespacedCustomObject(refTo('moduleTemplate', suite.state.ns, current));
    await suite.applyCatalog({
      ...published.moduleTemplate,
      metadata: { ...published.moduleTemplate.metadata, name: `${module}-regular` },
      spec: { ...published.moduleTemplate.spec, channel: 'regular' },
    } as typeof published.moduleTemplate);

    await suite.kyma('kyma-obsolete', [{ name: module }]);
    await suite.start();
    await suite.reconcileUntil(
      'kyma-obsolete',
      async () => (await suite.kcpKyma('kyma-obsolete')).status?.state === 'Error',
      'Kyma Error',
    );
    const expected = `failed to get module template: ModuleTemplate.${GROUP} "${module}-1.0.0" not found`;
    // Consistently: further passes leave it so.
    for (let pass = 0; pass < 3; pass++) {
      await suite.state
        .manager!.reconciler.reconcile(`${suite.state.ns}/kyma-obsolete`)
        .catch(() => undefined);
      expect((await suite.kcpKyma('kyma-obsolete')).status?.state).to.equal('Error');
      expect((await suite.moduleStatus('kyma-obsolete', module))?.message).to.equal(expected);
    }
    expect(await suite.manifests()).to.deep.equal([]);
  });

  describe('module-transferred-to-another-oci-registry', function () {
    let target: Registry;
    before(async function () {
      target = await startRegistry();
    });
    after(async function () {
      await target?.stop();
    });

    it('installs from the registry and repository the flags name; the Manifest lists the transferred images and the SKR workload uses them', async function () {
      const module = 'transferred';
      const subpath = 'sap-kyma-jellyfish-dev/restricted-market';
      const original = {
        operator: 'europe-docker.pkg.dev/kyma-project/prod/template-operator:1.0.3',
        keda: 'europe-docker.pkg.dev/kyma-project/prod/keda-manager:1.7.0',
        telemetry: 'europe-docker.pkg.dev/kyma-project/prod/telemetry-manager:1.43.1',
      };
      // As the OCM transfer rewrites them: the target repository in front, the digest pinned.
      const transferred = (reference: string, digit: string) =>
        `${target.host}/${subpath}/${reference.replace('europe-docker.pkg.dev/', '')}@sha256:${digit.repeat(64)}`;
      const rewritten = {
        operator: transferred(original.operator, 'a'),
        keda: transferred(original.keda, 'b'),
        telemetry: transferred(original.telemetry, 'c'),
      };
      const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${module}-controller-manager
  namespace: kyma-system
spec:
  selector:
    matchLabels: {app: ${module}}
  template:
    metadata:
      labels: {app: ${module}}
    spec:
      containers:
      - name: manager
        image: ${original.operator}
        env:
        - {name: DOKCER_KEDA_IMAGE, value: "${original.keda}"}
        - {name: DOKCER_TELEMETRY_IMAGE, value: "${original.telemetry}"}
        - {name: LOG_LEVEL, value: info}
`;
      const version: ModuleVersion = {
        moduleName: module,
        version: '1.0.3',
        ocmComponentName: `kyma-project.io/module/${module}`,
        rawManifest: docs(deployment, configMapYaml(`${module}-config`, 'kyma-system')),
      };
      const images = (references: typeof original) => [
        { name: 'template-operator', version: '1.0.3', imageReference: references.operator },
        { name: 'keda-manager', version: '1.7.0', imageReference: references.keda },
        { name: 'telemetry-manager', version: '1.43.1', imageReference: references.telemetry },
      ];
      // The original in the suite's registry (the agent must not read it), the transferred copy in the target's
      // repository; the catalog in the KCP is the transferred one's.
      await suite.publish({ ...version, images: images(original) });
      const copy = await publishModule(
        registryConfigFromFlags({
          ociRegistryHost: `http://${target.host}`,
          modulesRepositorySubpath: subpath,
        }),
        { ...version, images: images(rewritten) },
        { namespace: suite.state.ns },
      );
      await suite.applyCatalog(copy.moduleTemplate);
      await suite.applyCatalog(copy.moduleReleaseMeta);

      await suite.kyma('kyma-transferred', [{ name: module }]);
      await suite.start({
        settings: { ...suite.settings(), registryHost: `http://${target.host}`, repositorySubpath: subpath },
      });
      const apps = planes.skr.makeApiClient(AppsV1Api);
      const workload = () =>
        getOrUndefined(() =>
          apps.readNamespacedDeployment({ name: `${module}-controller-manager`, namespace: 'kyma-system' }),
        );
      await suite.reconcileUntil(
        'kyma-transferred',
        async () => (await workload()) !== undefined,
        'workload applied',
      );

      const [manifest] = (await suite.manifests()) as Json[];
      expect(manifest?.spec.localizedImages).to.have.members([
        rewritten.operator,
        rewritten.keda,
        rewritten.telemetry,
      ]);
      expect(manifest?.spec.install.source.repo).to.include(`${target.host}/${subpath}`);
      const container = (await workload())?.spec?.template.spec?.containers[0];
      expect(container?.image).to.equal(rewritten.operator);
      expect(container?.env?.map((variable) => variable.value)).to.deep.equal([
        rewritten.keda,
        rewritten.telemetry,
        'info',
      ]);

      // The deployment controller's part (no kube-controller-manager runs here): the rollout done, the Kyma Ready.
      const generation = (await workload())?.metadata?.generation ?? 1;
      await apps.patchNamespacedDeploymentStatus(
        {
          name: `${module}-controller-manager`,
          namespace: 'kyma-system',
          body: {
            status: {
              observedGeneration: generation,
              replicas: 1,
              updatedReplicas: 1,
              readyReplicas: 1,
              availableReplicas: 1,
              conditions: [{ type: 'Available', status: 'True', reason: 'MinimumReplicasAvailable' }],
            },
          },
        },
        mergePatch,
      );
      await suite.reconcileUntil(
        'kyma-transferred',
        async () => (await suite.kcpKyma('kyma-transferred')).status?.state === 'Ready',
        'Kyma Ready',
      );
    });
  });
});
