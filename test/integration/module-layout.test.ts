// A module published by `skr-modules publish` and one published by another tool in the same
// layout both install. The other tools are stood in for by packages/oci/test/hand-assembled.ts, a code path that
// shares nothing with publishModule (plain fetch pushes, its own tar writer, descriptors and catalog written as
// text): modulectl + `ocm transfer` (raw manifest as a tar, gzip-compressed, a macOS `._` entry first) and the old
// kyma CLI (raw manifest as plain YAML, application/octet-stream). The real skr-agent (`run`, from source) with
// --oci-registry-host installs all three into a real SKR API server from a real registry.
import { gzipSync } from 'node:zlib';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS, manifestName, type Kyma, type Manifest } from '@skr-watcher/api';
import { freePort, sharedEnvironment, startRegistry, type Registry } from '@skr-watcher/testenv';
import { parse } from 'yaml';
import { publishModule, registryConfigFromFlags } from '@skr-watcher/oci';
import { ENTRY_POINTS, startChild, type Child } from '../support/system/children.js';
import {
  handTar,
  pushComponent,
  RAW_MANIFEST_TAR_RESOURCE,
  v2Descriptor,
} from '../../packages/oci/test/hand-assembled.js';
import { eventually } from '../support/eventually.js';

const RUN = Date.now().toString(36);
const KCP_NAMESPACE = `layout-${RUN}`;
const SKR_NAMESPACE = `layout-skr-${RUN}`;
const KYMA = `layout-${RUN}`;

/** The objects a module installs: one ConfigMap in the Kyma's SKR namespace, saying who published it. */
function configMapYaml(name: string, publishedBy: string): string {
  return `apiVersion: v1
kind: ConfigMap
metadata:
  name: ${name}
  namespace: ${SKR_NAMESPACE}
data:
  publishedBy: ${publishedBy}
`;
}

/** ModuleTemplate and ModuleReleaseMeta as another tool writes them (text, not moduleTemplateFor). */
function catalogYaml(module: string, component: string): string {
  return `apiVersion: operator.kyma-project.io/v1beta2
kind: ModuleTemplate
metadata:
  name: ${module}-1.0.0
  namespace: ${KCP_NAMESPACE}
  labels:
    operator.kyma-project.io/module-name: ${module}
spec:
  moduleName: ${module}
  version: 1.0.0
  mandatory: false
  info:
    repository: https://example.invalid/${module}
    documentation: https://example.invalid/${module}/docs
---
apiVersion: operator.kyma-project.io/v1beta2
kind: ModuleReleaseMeta
metadata:
  name: ${module}
  namespace: ${KCP_NAMESPACE}
spec:
  moduleName: ${module}
  ocmComponentName: ${component}
  channels:
  - channel: regular
    version: 1.0.0
`;
}

const MODULES = {
  published: { module: 'layout-published', component: 'kyma-project.io/module/layout-published' },
  modulectl: { module: 'layout-modulectl', component: 'kyma-project.io/module/layout-modulectl' },
  kymaCli: { module: 'layout-kyma-cli', component: 'kyma-project.io/module/layout-kyma-cli' },
} as const;

describe('modules in the same layout from different tools install', function () {
  this.timeout(600_000);
  let registry: Registry;
  let agent: Child | undefined;
  let dir: string;

  before(async () => {
    const env = await sharedEnvironment();
    registry = await startRegistry();
    dir = await mkdtemp(join(tmpdir(), 'module-layout-'));
    const kcp = env.plane('kcp').kubeConfig();
    await kcp.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: KCP_NAMESPACE } } });
  });

  after(async () => {
    await agent?.stop();
    await registry?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
    const env = await sharedEnvironment();
    for (const [plane, namespace] of [
      ['kcp', KCP_NAMESPACE],
      ['skr1', SKR_NAMESPACE],
    ] as const) {
      await env
        .plane(plane)
        .kubeConfig()
        .makeApiClient(CoreV1Api)
        .deleteNamespace({ name: namespace })
        .catch(() => undefined);
    }
  });

  it('publishModule, modulectl + ocm (tar, gzip) and the old kyma CLI (plain YAML): all Ready, objects in the SKR', async () => {
    const env = await sharedEnvironment();
    const kcp = env.plane('kcp').kubeConfig();
    const api = kcp.makeApiClient(CustomObjectsApi);

    // 1. skr-modules' own path.
    await publishModule(
      { location: registryConfigFromFlags({ ociRegistryHost: registry.url }).location },
      {
        moduleName: MODULES.published.module,
        version: '1.0.0',
        ocmComponentName: MODULES.published.component,
        rawManifest: configMapYaml(MODULES.published.module, 'skr-modules'),
      },
    );
    const pushRawManifest = (component: string, resource: string, mediaType: string, data: Buffer) =>
      pushComponent({
        url: registry.url,
        repository: `component-descriptors/${component}`,
        tag: '1.0.0',
        descriptor: v2Descriptor(component, '1.0.0', resource),
        layers: [{ name: 'raw-manifest', mediaType, data }],
      });
    // 2. modulectl + ocm transfer, by hand: a directoryTree tar (gzip-compressed, AppleDouble entry first).
    await pushRawManifest(
      MODULES.modulectl.component,
      RAW_MANIFEST_TAR_RESOURCE,
      'application/x-tar',
      gzipSync(
        handTar([
          { name: '._layout-modulectl.yaml', data: 'AppleDouble metadata' },
          { name: 'layout-modulectl.yaml', data: configMapYaml(MODULES.modulectl.module, 'modulectl') },
        ]),
      ),
    );
    // 3. The old kyma CLI: the raw manifest is the YAML itself, application/octet-stream, with a globalAccess.
    await pushRawManifest(
      MODULES.kymaCli.component,
      `  - name: raw-manifest
    type: yaml
    relation: local
    version: 1.0.0
    access:
      type: localBlob
      localReference: "{{raw-manifest}}"
      mediaType: application/octet-stream
      globalAccess: {type: ociBlob, ref: "registry.example/${MODULES.kymaCli.component}", digest: "{{raw-manifest}}", size: 1}
`,
      'application/octet-stream',
      Buffer.from(configMapYaml(MODULES.kymaCli.module, 'kyma-cli')),
    );
    for (const { module, component } of Object.values(MODULES)) {
      for (const object of catalogYaml(module, component)
        .split('---\n')
        .map((doc) => parse(doc) as unknown)) {
        const kind =
          (object as { kind: string }).kind === 'ModuleTemplate'
            ? KINDS.moduleTemplate
            : KINDS.moduleReleaseMeta;
        await api.createNamespacedCustomObject({
          group: GROUP,
          version: kind.version,
          plural: kind.plural,
          namespace: KCP_NAMESPACE,
          body: object,
        });
      }
    }

    const core = kcp.makeApiClient(CoreV1Api);
    await core.createNamespacedSecret({
      namespace: KCP_NAMESPACE,
      body: {
        metadata: { name: `kubeconfig-${KYMA}`, labels: { [LABELS.kymaName]: KYMA } },
        stringData: { config: await readFile(env.plane('skr1').kubeconfigPath, 'utf8') },
      },
    });
    await api.createNamespacedCustomObject({
      group: GROUP,
      version: KINDS.kyma.version,
      plural: KINDS.kyma.plural,
      namespace: KCP_NAMESPACE,
      body: {
        apiVersion: `${GROUP}/${KINDS.kyma.version}`,
        kind: 'Kyma',
        metadata: { name: KYMA, namespace: KCP_NAMESPACE, labels: { [LABELS.runtimeId]: `runtime-${RUN}` } },
        spec: {
          channel: 'regular',
          modules: Object.values(MODULES).map(({ module }) => ({ name: module })),
          sync: { namespace: SKR_NAMESPACE, moduleCatalog: false },
        },
      },
    });

    agent = startChild({
      name: 'skr-agent',
      entry: ENTRY_POINTS.agent,
      logFile: join(dir, 'skr-agent.log'),
      args: [
        'run',
        '--kubeconfig',
        env.plane('kcp').kubeconfigPath,
        '--namespace',
        KCP_NAMESPACE,
        '--no-listener',
        '--metrics-address',
        `127.0.0.1:${await freePort()}`,
        '--events-address',
        `127.0.0.1:${await freePort()}`,
        '--oci-registry-host',
        registry.url,
      ],
    });

    const kyma = await eventually(
      `Kyma ${KYMA} Ready with its three modules Ready (agent log ${agent.logFile})`,
      async () => {
        if (!agent?.isRunning()) throw new Error(`skr-agent exited; see ${agent?.logFile}`);
        const current = (await api.getNamespacedCustomObject({
          group: GROUP,
          version: KINDS.kyma.version,
          plural: KINDS.kyma.plural,
          namespace: KCP_NAMESPACE,
          name: KYMA,
        })) as Kyma;
        const modules = current.status?.modules ?? [];
        if (current.status?.state !== 'Ready' || modules.filter((m) => m.state === 'Ready').length !== 3)
          throw new Error(
            `Kyma ${current.status?.state}: ${JSON.stringify(modules.map((m) => [m.name, m.state, m.message]))}`,
          );
        return current;
      },
      240_000,
      500,
    );
    expect(kyma.status?.modules?.map((m) => m.name).sort()).to.deep.equal(
      Object.values(MODULES)
        .map(({ module }) => module)
        .sort(),
    );

    const skrCore = env.plane('skr1').kubeConfig().makeApiClient(CoreV1Api);
    for (const [key, { module, component }] of Object.entries(MODULES)) {
      const configMap = await skrCore.readNamespacedConfigMap({ name: module, namespace: SKR_NAMESPACE });
      expect(configMap.data?.['publishedBy'], key).to.equal(
        { published: 'skr-modules', modulectl: 'modulectl', kymaCli: 'kyma-cli' }[key],
      );
      expect(
        configMap.metadata?.labels?.[LABELS.managedBy],
        `${key}: upstream's managed-by on SKR objects`,
      ).to.equal('kyma');
      const manifest = (await api.getNamespacedCustomObject({
        group: GROUP,
        version: KINDS.manifest.version,
        plural: KINDS.manifest.plural,
        namespace: KCP_NAMESPACE,
        name: manifestName(component, KYMA, module),
      })) as Manifest;
      const source = manifest.spec.install.source as { type?: string; ref?: string };
      // upstream's rule (notes §2.5): oci-dir only for exactly application/x-tar, else oci-ref.
      expect(source.type, key).to.equal(key === 'kymaCli' ? 'oci-ref' : 'oci-dir');
      expect(source.ref, key).to.match(/^sha256:[0-9a-f]{64}$/);
      expect(manifest.status?.state, key).to.equal('Ready');
    }

    // Removing the Kyma removes what the modules installed (the agent keeps running for that).
    await api.deleteNamespacedCustomObject({
      group: GROUP,
      version: KINDS.kyma.version,
      plural: KINDS.kyma.plural,
      namespace: KCP_NAMESPACE,
      name: KYMA,
    });
    await eventually(
      "the modules' ConfigMaps gone from the SKR after the Kyma was deleted",
      async () => {
        const left = await skrCore.listNamespacedConfigMap({ namespace: SKR_NAMESPACE });
        const ours = left.items.filter((c) =>
          Object.values(MODULES).some(({ module }) => c.metadata?.name === module),
        );
        if (ours.length > 0) throw new Error(`still there: ${ours.map((c) => c.metadata?.name).join(', ')}`);
        return true;
      },
      180_000,
      500,
    );
  });
});
