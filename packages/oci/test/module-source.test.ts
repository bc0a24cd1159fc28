// Reading modules from a real registry (go-containerregistry from packages/testenv): publish, resolve, pull,
// authentication, TLS, the shared cache, and the request counts a no-op pass must not exceed.
import { expect } from 'chai';
import { Registry as Metrics } from '@skr-watcher/telemetry';
import { startRegistry, type Registry } from '@skr-watcher/testenv';
import {
  createModuleSource,
  publishModule,
  registryConfigFromFlags,
  type ModuleSource,
  type ModuleVersion,
} from '../src/index.js';
import { failure } from './hand-assembled.js';

const RAW_MANIFEST = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: samples.operator.kyma-project.io
spec:
  group: operator.kyma-project.io
  names: {kind: Sample, plural: samples}
  scope: Namespaced
  versions: [{name: v1alpha1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: sample-operator
  namespace: sample-system
spec:
  selector: {matchLabels: {app: sample}}
  template:
    metadata: {labels: {app: sample}}
    spec: {containers: [{name: manager, image: europe-docker.pkg.dev/kyma-project/prod/sample:1.0.0}]}
`;

export function sampleModule(version = '1.0.0', extra: Partial<ModuleVersion> = {}): ModuleVersion {
  return {
    moduleName: 'sample',
    version,
    ocmComponentName: 'kyma-project.io/module/sample',
    rawManifest: RAW_MANIFEST,
    defaultCr:
      'apiVersion: operator.kyma-project.io/v1alpha1\nkind: Sample\nmetadata: {name: sample-default}\n',
    images: [
      {
        name: 'sample-operator',
        version,
        imageReference: `europe-docker.pkg.dev/kyma-project/prod/sample:${version}`,
      },
    ],
    ...extra,
  };
}

describe('module source on a real registry', function () {
  this.timeout(600_000); // a cold cache builds the registry first

  describe('anonymous, plain HTTP', () => {
    let registry: Registry;
    let source: ModuleSource;
    const subpath = 'kyma/modules';
    before(async () => {
      registry = await startRegistry();
      const config = registryConfigFromFlags({
        ociRegistryHost: `http://${registry.host}`,
        modulesRepositorySubpath: subpath,
      });
      await publishModule(config, sampleModule('1.0.0'));
      source = createModuleSource(config);
    });
    after(async () => {
      await source?.close();
      await registry?.stop();
    });

    it('resolves a published version into an install source, localized images and layers', async () => {
      const resolved = await source.resolve('kyma-project.io/module/sample', '1.0.0');
      expect(resolved.version).to.equal('1.0.0');
      expect(resolved.install.name).to.equal('raw-manifest');
      expect(resolved.install.source).to.include({
        repo: `${registry.host}/${subpath}`,
        name: 'kyma-project.io/module/sample',
        type: 'oci-dir',
      });
      expect(resolved.install.source.ref).to.match(/^sha256:[a-f0-9]{64}$/);
      expect(resolved.localizedImages).to.deep.equal([
        'europe-docker.pkg.dev/kyma-project/prod/sample:1.0.0',
      ]);
      expect(resolved.layers.map((l) => l.name)).to.deep.equal(['raw-manifest', 'default-cr']);
    });

    it('pulls the raw manifest into objects, a fresh copy each call', async () => {
      const { install } = await source.resolve('kyma-project.io/module/sample', '1.0.0');
      const objects = await source.rawManifestObjects(install.source);
      expect(objects.map((o) => `${o.kind}/${o.metadata.name}`)).to.deep.equal([
        'CustomResourceDefinition/samples.operator.kyma-project.io',
        'Deployment/sample-operator',
      ]);
      objects[0]!.metadata.name = 'changed by a caller';
      const again = await source.rawManifestObjects(install.source);
      expect(again[0]!.metadata.name).to.equal('samples.operator.kyma-project.io');
    });

    it('sends no request for a version and an install source it has read (a no-op pass)', async () => {
      const { install } = await source.resolve('kyma-project.io/module/sample', '1.0.0');
      await source.rawManifestObjects(install.source);
      const before = source.requests();
      for (let pass = 0; pass < 5; pass++) {
        const resolved = await source.resolve('kyma-project.io/module/sample', '1.0.0');
        await source.rawManifestObjects(resolved.install.source);
      }
      expect(source.requests()).to.deep.equal(before);
    });

    it('pulls each digest once for many concurrent readers (one pull per digest per process)', async () => {
      await publishModule(
        registryConfigFromFlags({
          ociRegistryHost: `http://${registry.host}`,
          modulesRepositorySubpath: subpath,
        }),
        sampleModule('2.0.0'),
      );
      const metrics = new Metrics();
      const fresh = createModuleSource({
        ...registryConfigFromFlags({
          ociRegistryHost: `http://${registry.host}`,
          modulesRepositorySubpath: subpath,
        }),
        metrics,
      });
      try {
        const resolved = await Promise.all(
          Array.from({ length: 50 }, () => fresh.resolve('kyma-project.io/module/sample', '2.0.0')),
        );
        await Promise.all(resolved.map((r) => fresh.rawManifestObjects(r.install.source)));
        // manifest, config, descriptor layer, raw-manifest layer: each once.
        expect(fresh.requests()).to.include({ manifest: 1, blob: 3, token: 0 });
        const counter = await metrics.getSingleMetricAsString('skr_agent_oci_registry_requests_total');
        expect(counter).to.include('skr_agent_oci_registry_requests_total{operation="blob",code="200"} 3');
        expect(counter).to.include(
          'skr_agent_oci_registry_requests_total{operation="manifest",code="200"} 1',
        );
      } finally {
        await fresh.close();
      }
    });

    it('keeps the cache inside its byte bound, pulling again what it dropped', async () => {
      const small = createModuleSource({
        ...registryConfigFromFlags({
          ociRegistryHost: `http://${registry.host}`,
          modulesRepositorySubpath: subpath,
        }),
        bounds: { maxCacheBytes: 8 * 1024 },
      });
      try {
        for (const version of ['1.0.0', '2.0.0', '1.0.0']) {
          const resolved = await small.resolve('kyma-project.io/module/sample', version);
          await small.rawManifestObjects(resolved.install.source);
          expect(small.cacheStats().bytes).to.be.at.most(8 * 1024);
        }
        expect(small.cacheStats().evictions).to.be.greaterThan(0);
        expect(small.requests().manifest).to.equal(3);
      } finally {
        await small.close();
      }
    });

    it('reads a Manifest written before 2025-10, whose repo still ends in /component-descriptors', async () => {
      const { install } = await source.resolve('kyma-project.io/module/sample', '1.0.0');
      const old = { ...install.source, repo: `${install.source.repo}/component-descriptors` };
      expect(await source.rawManifestObjects(old)).to.have.length(2);
    });

    it('says NotFound for a version the registry does not have', async () => {
      const error = await failure(source.resolve('kyma-project.io/module/sample', '9.9.9'));
      expect(error.reason).to.equal('NotFound');
      expect(error.transient).to.equal(false);
      expect(error.message)
        .to.include('kyma-project.io/module/sample')
        .and.include('9.9.9')
        .and.include('not found');
    });
  });

  describe('Bearer token flow over TLS', () => {
    let registry: Registry;
    const auth = { username: 'modules', password: 'pa55word' };
    before(async () => {
      registry = await startRegistry({ auth, tls: true });
      const config = registryConfigFromFlags({
        ociRegistryHost: registry.host,
        dockerConfigJson: registry.dockerConfigJson(),
      });
      await publishModule({ ...config, ca: registry.ca! }, sampleModule('1.0.0'));
    });
    after(async () => {
      await registry?.stop();
    });

    it('pulls with the credentials of a dockerconfigjson Secret (host taken from its one auths entry)', async () => {
      const source = createModuleSource({
        ...registryConfigFromFlags({ dockerConfigJson: registry.dockerConfigJson() }),
        ca: registry.ca!,
      });
      try {
        const resolved = await source.resolve('kyma-project.io/module/sample', '1.0.0');
        expect(await source.rawManifestObjects(resolved.install.source)).to.have.length(2);
        // One token for the repository, then requests with it: no 401 round trip per request.
        expect(source.requests()).to.include({ token: 1, manifest: 2, blob: 3 });
      } finally {
        await source.close();
      }
    });

    it('says Unauthorized without credentials and with a wrong password', async () => {
      const anonymous = createModuleSource({
        ...registryConfigFromFlags({ ociRegistryHost: `https://${registry.host}` }),
        ca: registry.ca!,
      });
      const wrong = createModuleSource({
        ...registryConfigFromFlags({
          dockerConfigJson: JSON.stringify({
            auths: { [registry.host]: { username: 'modules', password: 'nope' } },
          }),
        }),
        ca: registry.ca!,
      });
      try {
        const none = await failure(anonymous.resolve('kyma-project.io/module/sample', '1.0.0'));
        expect(none.reason).to.equal('Unauthorized');
        expect(none.message).to.include('anonymous');
        const refused = await failure(wrong.resolve('kyma-project.io/module/sample', '1.0.0'));
        expect(refused.reason).to.equal('Unauthorized');
        expect(refused.message).to.include('refused the credentials');
      } finally {
        await anonymous.close();
        await wrong.close();
      }
    });
  });
});
