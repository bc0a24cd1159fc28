// Modules whose manager is a workload that kubelets must run, as upstream lifecycle-manager's e2e publishes them for
// its status-decoupling and deprovision scenarios: a StatefulSet manager (with its headless Service), and misconfigured
// twins whose image cannot be pulled, one with a StatefulSet and one with a Deployment. Only for planes with nodes.
import type { KubeConfig } from '@kubernetes/client-node';
import { DEFAULTS } from '@skr-watcher/api';
import type { ModuleVersion } from '@skr-watcher/oci';
import { stringify } from 'yaml';
import { createCatalog, publishModules } from './modules.js';

export type ManagerKind = 'StatefulSet' | 'Deployment';

export interface WorkloadModule {
  module: string;
  ocmComponentName: string;
  kind: ManagerKind;
  /** The manager workload's name, in DEFAULTS.skrNamespace; its Pods carry `app.kubernetes.io/name=<name>`. */
  workload: string;
  namespace: string;
}

/** A module whose manager is a workload of `kind`. */
export function workloadModule(module: string, kind: ManagerKind): WorkloadModule {
  return {
    module,
    ocmComponentName: `kyma-project.io/module/${module}`,
    kind,
    workload: `${module}-manager`,
    namespace: DEFAULTS.skrNamespace,
  };
}

/**
 * The manager: Node from the run's image serving its readiness probe, which starts answering only after a few seconds
 * so that every rollout has a moment where the workload is not Ready yet.
 */
function managerObjects(module: WorkloadModule, image: string): unknown[] {
  const labels = { 'app.kubernetes.io/name': module.workload };
  const metadata = { name: module.workload, namespace: module.namespace, labels };
  const template = {
    metadata: { labels },
    spec: {
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: 2,
      securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        {
          name: 'manager',
          image,
          command: ['node'],
          args: [
            '-e',
            "require('node:http').createServer((_, res) => res.end('ok')).listen(8080); process.on('SIGTERM', () => process.exit(0));",
          ],
          ports: [{ name: 'http', containerPort: 8080 }],
          readinessProbe: { httpGet: { path: '/', port: 8080 }, initialDelaySeconds: 3, periodSeconds: 1 },
          resources: { requests: { cpu: '10m', memory: '32Mi' }, limits: { memory: '64Mi' } },
          securityContext: {
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            capabilities: { drop: ['ALL'] },
          },
        },
      ],
    },
  };
  const spec = { replicas: 1, selector: { matchLabels: labels }, template };
  if (module.kind === 'Deployment') return [{ apiVersion: 'apps/v1', kind: 'Deployment', metadata, spec }];
  return [
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata,
      spec: { clusterIP: 'None', selector: labels, ports: [{ name: 'http', port: 8080 }] },
    },
    { apiVersion: 'apps/v1', kind: 'StatefulSet', metadata, spec: { ...spec, serviceName: module.workload } },
  ];
}

function moduleVersion(module: WorkloadModule, image: string): ModuleVersion {
  return {
    moduleName: module.module,
    version: '1.0.0',
    channels: ['regular'],
    ocmComponentName: module.ocmComponentName,
    rawManifest: managerObjects(module, image)
      .map((object) => stringify(object))
      .join('---\n'),
    rawManifestFileName: `${module.module}.yaml`,
  };
}

/** Publishes each module (with the image its manager runs) and puts its ModuleTemplate and ModuleReleaseMeta in KCP. */
export async function publishWorkloadModules(options: {
  registryHost: string;
  kcp: KubeConfig;
  namespace: string;
  modules: { module: WorkloadModule; image: string }[];
}): Promise<void> {
  const published = await publishModules(
    options.registryHost,
    options.modules.map(({ module, image }) => moduleVersion(module, image)),
  );
  for (const entry of published) await createCatalog(options.kcp, options.namespace, entry);
}
