// A module catalog shaped like a real one, for the suites and measurements of the SKR catalog copies: modulectl
// writes each ModuleTemplate with the module's OCM component descriptor (its resources, images, sources and
// signature), the default Module CR and the module's links, several kB each, and a KCP offers a few dozen.
import { createHash } from 'node:crypto';
import { GROUP, KINDS, moduleReleaseMetaSchema, moduleTemplateSchema } from '@skr-watcher/api';
import type { ModuleReleaseMeta, ModuleTemplate } from '@skr-watcher/api';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** One OCM resource of a descriptor, with its access and digest as modulectl records them. */
function ocmResource(module: string, version: string, name: string, image: boolean) {
  const digest = sha256(`${module}/${name}/${version}`);
  return {
    name,
    relation: image ? 'external' : 'local',
    type: image ? 'ociArtifact' : 'directoryTree',
    version,
    labels: [
      { name: 'security.kyma-project.io/scan', value: 'enabled', version: 'v1' },
      { name: 'kyma-project.io/built-by', value: 'modulectl', version: 'v1' },
    ],
    access: image
      ? {
          type: 'ociArtifact',
          imageReference: `europe-docker.pkg.dev/kyma-project/prod/${module}/${name}:${version}@sha256:${digest}`,
        }
      : { type: 'localBlob', localReference: `sha256:${digest}`, mediaType: 'application/x-tar' },
    digest: { hashAlgorithm: 'SHA-256', normalisationAlgorithm: 'genericBlobDigest/v1', value: digest },
  };
}

/** A ModuleTemplate `<module>-<version>` as modulectl writes it (about 6 kB of JSON), parsed as the agent reads it. */
export function realisticModuleTemplate(namespace: string, module: string, version: string): ModuleTemplate {
  const component = `kyma-project.io/module/${module}`;
  return moduleTemplateSchema.parse({
    apiVersion: `${GROUP}/${KINDS.moduleTemplate.version}`,
    kind: KINDS.moduleTemplate.kind,
    metadata: {
      name: `${module}-${version}`,
      namespace,
      labels: { 'operator.kyma-project.io/module-name': module },
      annotations: { 'operator.kyma-project.io/is-cluster-scoped': 'false' },
    },
    spec: {
      moduleName: module,
      version,
      data: {
        apiVersion: `${GROUP}/${KINDS.sample.version}`,
        kind: KINDS.sample.kind,
        metadata: { name: `default-${module}`, namespace: 'kyma-system' },
        spec: { greeting: `hello from ${module} ${version}`, resourceFilePath: './module-data/yaml' },
      },
      manager: {
        name: `${module}-controller-manager`,
        namespace: 'kyma-system',
        group: 'apps',
        version: 'v1',
        kind: 'Deployment',
      },
      info: {
        repository: `https://github.com/kyma-project/${module}.git`,
        documentation: `https://help.sap.com/docs/btp/sap-business-technology-platform/${module}`,
        icons: [{ name: 'module-icon', link: `https://kyma-project.io/icons/${module}.svg` }],
      },
      associatedResources: [
        { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: KINDS.sample.kind },
      ],
      resources: [
        {
          name: 'rawManifest',
          link: `https://github.com/kyma-project/${module}/releases/download/${version}/${module}-manager.yaml`,
        },
      ],
      descriptor: {
        meta: { schemaVersion: 'v2' },
        component: {
          name: component,
          version,
          provider:
            '{"name":"kyma-project.io","labels":[{"name":"kyma-project.io/built-by","value":"modulectl"}]}',
          labels: [{ name: 'kyma-project.io/module-type', value: 'kyma-module', version: 'v1' }],
          repositoryContexts: [
            {
              baseUrl: 'europe-docker.pkg.dev/kyma-project/prod/unsigned',
              componentNameMapping: 'urlPath',
              type: 'OCIRegistry',
            },
          ],
          componentReferences: [],
          resources: [
            ocmResource(module, version, 'raw-manifest', false),
            ocmResource(module, version, 'default-cr', false),
            ...['manager', 'webhook', 'kube-rbac-proxy', 'fluent-bit'].map((image) =>
              ocmResource(module, version, image, true),
            ),
          ],
          sources: [
            {
              name: 'module-sources',
              type: 'Github',
              version,
              labels: [{ name: 'git.kyma-project.io/ref', value: 'refs/heads/main', version: 'v1' }],
              access: {
                type: 'gitHub',
                repoUrl: `https://github.com/kyma-project/${module}`,
                commit: sha256(`${module}@${version}`).slice(0, 40),
              },
            },
          ],
        },
        signatures: [
          {
            name: 'kyma-project.io',
            digest: {
              hashAlgorithm: 'SHA-256',
              normalisationAlgorithm: 'jsonNormalisation/v4alpha1',
              value: sha256(`${component}:${version}`),
            },
            signature: {
              algorithm: 'RSASSA-PSS',
              mediaType: 'application/vnd.ocm.signature.rsa',
              // An RSA 4096 signature, hex encoded.
              value: Array.from({ length: 16 }, (_, i) => sha256(`${component}:${version}:${i}`)).join(''),
            },
          },
        ],
      },
    },
  });
}

/** The ModuleReleaseMeta of `module` with one channel per version. */
export function moduleReleaseMeta(
  namespace: string,
  module: string,
  channels: Record<string, string>,
): ModuleReleaseMeta {
  return moduleReleaseMetaSchema.parse({
    apiVersion: `${GROUP}/${KINDS.moduleReleaseMeta.version}`,
    kind: KINDS.moduleReleaseMeta.kind,
    metadata: { name: module, namespace },
    spec: {
      moduleName: module,
      ocmComponentName: `kyma-project.io/module/${module}`,
      channels: Object.entries(channels).map(([channel, version]) => ({ channel, version })),
    },
  });
}

/** Module names a CRD accepts (segments of three or more letters): `module-aaa`, `module-aab`, ... */
const moduleName = (i: number) =>
  `module-${[2, 1, 0].map((place) => String.fromCharCode(97 + (Math.floor(i / 26 ** place) % 26))).join('')}`;

/** `modules` modules, each with a ModuleReleaseMeta and two templates (regular 1.0.0, fast 1.1.0). */
export function realisticCatalog(namespace: string, modules: number) {
  const names = Array.from({ length: modules }, (_, i) => moduleName(i));
  return {
    templates: names.flatMap((module) =>
      ['1.0.0', '1.1.0'].map((version) => realisticModuleTemplate(namespace, module, version)),
    ),
    metas: names.map((module) => moduleReleaseMeta(namespace, module, { regular: '1.0.0', fast: '1.1.0' })),
  };
}
