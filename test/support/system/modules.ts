// Module installation in a local system: a real OCI registry next to the planes (testenv's
// go-containerregistry build), modules published into it with skr-modules' publishModule in modulectl's layout,
// their ModuleTemplates and ModuleReleaseMetas in KCP, and the agent pointed at the registry with upstream's flags.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { CustomObjectsApi, type KubeConfig, type V1Container, type V1Probe } from '@kubernetes/client-node';
import { DEFAULTS, GROUP } from '@skr-watcher/api';
import {
  publishModule,
  registryConfigFromFlags,
  type ModuleVersion,
  type PublishedModule,
} from '@skr-watcher/oci';
import { startRegistry, type Registry } from '@skr-watcher/testenv';
import { stringify } from 'yaml';
import { ENTRY_POINTS } from './children.js';

/** The module the demo enables: its own CRD, a ConfigMap and (with nodes to run it) an operator Deployment. */
export const GREETER = {
  module: 'greeter',
  version: '1.0.0',
  ocmComponentName: 'kyma-project.io/module/greeter',
  group: 'demo.kyma-project.io',
  crdVersion: 'v1alpha1',
  kind: 'Greeter',
  plural: 'greeters',
  configMap: 'greeter-config',
  deployment: 'greeter-operator',
  namespace: DEFAULTS.skrNamespace,
} as const;

/** The default CR the ModuleTemplate carries (`spec.data`); the Manifest's reconcile creates it once. */
export const GREETER_DEFAULT_CR = {
  apiVersion: `${GREETER.group}/${GREETER.crdVersion}`,
  kind: GREETER.kind,
  metadata: { name: 'default', namespace: GREETER.namespace },
  spec: { greeting: 'hello from the greeter module' },
};

function greeterCrd() {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${GREETER.plural}.${GREETER.group}` },
    spec: {
      group: GREETER.group,
      names: { kind: GREETER.kind, plural: GREETER.plural, singular: 'greeter', listKind: 'GreeterList' },
      scope: 'Namespaced',
      versions: [
        {
          name: GREETER.crdVersion,
          served: true,
          storage: true,
          subresources: { status: {} },
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: {
                spec: { type: 'object', properties: { greeting: { type: 'string' } } },
                status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
              },
            },
          },
        },
      ],
    },
  };
}

/**
 * Node from the run's image (its entrypoint is the agent): a stand-in operator that only answers its readiness probe
 * on port 8080, locked down as the shipped Deployments run.
 */
export function standInOperator(name: string, image: string, readinessProbe: V1Probe): V1Container {
  return {
    name,
    image,
    command: ['node'],
    args: [
      '-e',
      "require('node:http').createServer((_, res) => res.end('ok')).listen(8080); process.on('SIGTERM', () => process.exit(0));",
    ],
    ports: [{ name: 'http', containerPort: 8080 }],
    readinessProbe,
    resources: { requests: { cpu: '10m', memory: '32Mi' }, limits: { memory: '64Mi' } },
    securityContext: {
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    },
  };
}

/**
 * The operator: a Deployment of one Pod that serves a readiness endpoint. Only where a node runs it (`--pods`); the
 * process demo has no kubelet or controller-manager, so a Deployment there would never become available and the
 * module would never be Ready (readiness: every workload of the set available, decision 020).
 */
function greeterOperator(image: string, version: string) {
  const labels = { 'app.kubernetes.io/name': GREETER.deployment };
  // The version only in the Pod template (a selector is immutable): a new version rolls the Deployment.
  const podLabels = { ...labels, 'app.kubernetes.io/version': version };
  return [
    {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: GREETER.deployment, namespace: GREETER.namespace },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: GREETER.deployment, namespace: GREETER.namespace, labels },
      spec: {
        replicas: 1,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels: podLabels },
          spec: {
            serviceAccountName: GREETER.deployment,
            automountServiceAccountToken: false,
            securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
            containers: [
              standInOperator('operator', image, { httpGet: { path: '/', port: 8080 }, periodSeconds: 2 }),
            ],
          },
        },
      },
    },
  ];
}

/**
 * A greeter module version (default GREETER.version): CRD, ConfigMap, and the operator when `operatorImage` is
 * given.
 */
export function greeterModule(options: { operatorImage?: string; version?: string } = {}): ModuleVersion {
  const version = options.version ?? GREETER.version;
  const objects: unknown[] = [
    greeterCrd(),
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: GREETER.configMap, namespace: GREETER.namespace },
      data: { greeting: 'hello', installedBy: 'the greeter module (raw manifest from the OCI registry)' },
    },
    ...(options.operatorImage ? greeterOperator(options.operatorImage, version) : []),
  ];
  return {
    moduleName: GREETER.module,
    version,
    channels: ['regular'],
    ocmComponentName: GREETER.ocmComponentName,
    rawManifest: objects.map((object) => stringify(object)).join('---\n'),
    rawManifestFileName: 'greeter.yaml',
    defaultCr: stringify(GREETER_DEFAULT_CR),
  };
}

/**
 * The sample module of manifests/samples (the Module CR the demo edits) as registry content. With the agent
 * pointed at a registry every module goes through a Manifest, so its versions must be there too; its CRD is
 * one of the agent's own (installed in every SKR), so its raw manifest holds only a ConfigMap, or, given
 * `manifestBytes`, that many bytes of ConfigMaps of 40 keys each (about 850 bytes of YAML apiece, as many tokens per
 * byte as a CRD's schema), for a module of a real one's size.
 */
export function sampleModules(options: { manifestBytes?: number } = {}): ModuleVersion[] {
  return (
    [
      ['1.0.0', 'regular'],
      ['1.1.0', 'fast'],
    ] as const
  ).map(([version, channel]) => {
    const documents = [
      stringify({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'sample-module', namespace: DEFAULTS.skrNamespace },
        data: { version },
      }),
    ];
    for (let part = 0; documents.join('---\n').length < (options.manifestBytes ?? 0); part++) {
      documents.push(
        stringify({
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: {
            name: `sample-part-${part}`,
            namespace: DEFAULTS.skrNamespace,
            labels: { part: `${part}` },
          },
          data: Object.fromEntries(Array.from({ length: 40 }, (_, key) => [`key${key}`, `value-${key}`])),
        }),
      );
    }
    return {
      moduleName: 'sample',
      version,
      channels: [channel],
      ocmComponentName: 'kyma-project.io/module/sample',
      rawManifest: documents.join('---\n'),
    };
  });
}

/** Whether the skr-agent that is run has the module installation flags (`run --help` lists --oci-registry-host). */
export function agentInstallsModules(): boolean {
  const help = spawnSync(
    process.execPath,
    ['--import', 'tsx', '--conditions=source', ENTRY_POINTS.agent, 'run', '--help'],
    {
      encoding: 'utf8',
      timeout: 60_000,
    },
  );
  return help.status === 0 && help.stdout.includes('--oci-registry-host');
}

export interface ModuleRegistry {
  registry: Registry;
  /** What `--oci-registry-host` gets: plain HTTP on loopback. */
  registryHost: string;
  agentArgs: string[];
  stop(): Promise<void>;
}

export async function startModuleRegistry(
  dir: string,
  log?: (line: string) => void,
): Promise<ModuleRegistry> {
  const registry = await startRegistry({ dir: join(dir, 'registry'), ...(log ? { log } : {}) });
  const registryHost = `http://${registry.host}`;
  return {
    registry,
    registryHost,
    agentArgs: ['--oci-registry-host', registryHost],
    stop: () => registry.stop(),
  };
}

/** Publishes module versions with skr-modules' publishModule, in modulectl's layout. */
export async function publishModules(
  registryHost: string,
  modules: ModuleVersion[],
): Promise<PublishedModule[]> {
  const published: PublishedModule[] = [];
  for (const module of modules) {
    published.push(
      await publishModule(
        { location: registryConfigFromFlags({ ociRegistryHost: registryHost }).location },
        module,
      ),
    );
  }
  return published;
}

/** Creates the ModuleTemplate and ModuleReleaseMeta publishModule printed for a version, in KCP. */
export async function createCatalog(
  kcp: KubeConfig,
  namespace: string,
  published: PublishedModule,
): Promise<void> {
  const api = kcp.makeApiClient(CustomObjectsApi);
  for (const object of [published.moduleTemplate, published.moduleReleaseMeta]) {
    const plural = object.kind === 'ModuleTemplate' ? 'moduletemplates' : 'modulereleasemetas';
    await api
      .createNamespacedCustomObject({
        group: GROUP,
        version: 'v1beta2',
        plural,
        namespace,
        body: { ...object, metadata: { ...object.metadata, namespace } },
      })
      .catch((cause: unknown) => {
        throw new Error(`create ${object.kind} ${namespace}/${object.metadata.name}`, { cause });
      });
  }
}
