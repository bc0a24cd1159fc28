// Component versions written by other tools in the same layout (hand-assembled here on a separate code path: raw
// pushes, a tar writer of its own, descriptors as text) must read as upstream reads them.
import { gzipSync } from 'node:zlib';
import { expect } from 'chai';
import { startRegistry, type Registry } from '@skr-watcher/testenv';
import { createModuleSource, registryConfigFromFlags, type ModuleSource } from '../src/index.js';
import {
  CONFIGMAP_YAML,
  handTar,
  pushComponent,
  RAW_MANIFEST_TAR_RESOURCE,
  v2Descriptor,
} from './hand-assembled.js';

describe('module source reads component versions other tools wrote', function () {
  this.timeout(600_000);
  let registry: Registry;
  let source: ModuleSource;

  before(async () => {
    registry = await startRegistry();
    source = createModuleSource(registryConfigFromFlags({ ociRegistryHost: `http://${registry.host}/` }));
  });
  after(async () => {
    await source?.close();
    await registry?.stop();
  });

  it('modulectl + ocm transfer: tar layer with AppleDouble metadata first, images, ignored resources', async () => {
    const name = 'kyma-project.io/module/template-operator';
    await pushComponent({
      url: registry.url,
      repository: `component-descriptors/${name}`,
      tag: '1.0.0',
      descriptor: v2Descriptor(
        name,
        '1.0.0',
        `  - name: template-operator
    type: ociArtifact
    relation: external
    version: 1.0.0
    access:
      type: ociArtifact
      imageReference: europe-docker.pkg.dev/kyma-project/prod/template-operator:1.0.0@sha256:${'c'.repeat(64)}
  - name: scanner-image
    type: ociImage
    relation: external
    version: 1.0.0
    access:
      type: ociRegistry/v1
      imageReference: europe-docker.pkg.dev/kyma-project/prod/scanner:2
${RAW_MANIFEST_TAR_RESOURCE}  - name: moduletemplate
    type: plainText
    relation: local
    version: 1.0.0
    access:
      type: localBlob/v1
      localReference: "{{moduletemplate}}"
      mediaType: application/octet-stream
`,
      ),
      layers: [
        {
          name: 'raw-manifest',
          mediaType: 'application/x-tar',
          data: handTar([
            { name: './', type: '5' },
            { name: './._template-operator.yaml', data: 'AppleDouble junk, not YAML: {{{' },
            { name: './template-operator.yaml', data: CONFIGMAP_YAML },
          ]),
        },
        {
          name: 'moduletemplate',
          mediaType: 'application/octet-stream',
          data: Buffer.from('kind: ModuleTemplate\n'),
        },
      ],
    });
    const resolved = await source.resolve(name, '1.0.0');
    expect(resolved.install.source.type).to.equal('oci-dir');
    expect(resolved.localizedImages).to.deep.equal([
      `europe-docker.pkg.dev/kyma-project/prod/template-operator:1.0.0@sha256:${'c'.repeat(64)}`,
    ]);
    const objects = await source.rawManifestObjects(resolved.install.source);
    expect(objects.map((o) => o.metadata.name)).to.deep.equal(['hand-made']);
  });

  it('the old kyma CLI: raw-manifest of type yaml, octet-stream with globalAccess, the blob is the YAML', async () => {
    const name = 'kyma-project.io/module/old-cli';
    await pushComponent({
      url: registry.url,
      repository: `component-descriptors/${name}`,
      tag: '0.9.0',
      descriptor: v2Descriptor(
        name,
        '0.9.0',
        `  - name: raw-manifest
    type: yaml
    relation: local
    version: 0.9.0
    access:
      type: localBlob
      localReference: "{{raw-manifest}}"
      mediaType: application/octet-stream
      globalAccess:
        type: ociBlob
        ref: registry.example/component-descriptors/${name}
        digest: "{{raw-manifest}}"
        size: ${CONFIGMAP_YAML.length}
`,
      ),
      layers: [
        { name: 'raw-manifest', mediaType: 'application/octet-stream', data: Buffer.from(CONFIGMAP_YAML) },
      ],
    });
    const resolved = await source.resolve(name, '0.9.0');
    expect(resolved.install.source.type).to.equal('oci-ref');
    expect((await source.rawManifestObjects(resolved.install.source))[0]!.kind).to.equal('ConfigMap');
  });

  it('gzip-compressed layers, a tar and plain YAML, are read through', async () => {
    const name = 'kyma-project.io/module/gzipped';
    for (const [version, mediaType, data] of [
      ['1.0.0', 'application/x-tar', gzipSync(handTar([{ name: 'gz.yaml', data: CONFIGMAP_YAML }]))],
      ['1.0.1', 'application/x-yaml+gzip', gzipSync(CONFIGMAP_YAML)],
    ] as const) {
      await pushComponent({
        url: registry.url,
        repository: `component-descriptors/${name}`,
        tag: version,
        descriptor: v2Descriptor(
          name,
          version,
          RAW_MANIFEST_TAR_RESOURCE.replace('application/x-tar', mediaType).replace('1.0.0', version),
        ),
        layers: [{ name: 'raw-manifest', mediaType, data }],
      });
      const resolved = await source.resolve(name, version);
      expect((await source.rawManifestObjects(resolved.install.source))[0]!.metadata.name).to.equal(
        'hand-made',
      );
    }
  });

  it('an ocm.software/v3alpha1 descriptor, stored as plain YAML under a legacy config and a Docker manifest', async () => {
    const name = 'kyma-project.io/module/v3';
    await pushComponent({
      url: registry.url,
      repository: `component-descriptors/${name}`,
      tag: '3.0.0',
      configMediaType: 'application/vnd.gardener.cloud.cnudie.component.config.v1+json',
      manifestMediaType: 'application/vnd.docker.distribution.manifest.v2+json',
      descriptorLayer: 'yaml',
      descriptor: `apiVersion: ocm.software/v3alpha1
kind: ComponentVersion
metadata:
  name: ${name}
  version: 3.0.0
  provider:
    name: kyma-project.io
repositoryContexts:
- type: OCIRegistry
  baseUrl: registry.example
  componentNameMapping: urlPath
spec:
  resources:
  - name: raw-manifest
    type: directoryTree
    relation: local
    version: 3.0.0
    access:
      type: localOciBlob
      localReference: "{{raw-manifest}}"
      mediaType: application/x-tar
`,
      layers: [
        {
          name: 'raw-manifest',
          mediaType: 'application/x-tar',
          data: handTar([{ name: 'v3.yaml', data: CONFIGMAP_YAML }]),
        },
      ],
    });
    const resolved = await source.resolve(name, '3.0.0');
    expect(resolved.descriptor.schema).to.equal('v3alpha1');
    expect(resolved.version).to.equal('3.0.0');
    expect(await source.rawManifestObjects(resolved.install.source)).to.have.length(1);
  });
});
