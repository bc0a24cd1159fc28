// Modules whose manager is a workload that kubelets must run, as upstream lifecycle-manager's e2e publishes them for
// its status-decoupling and deprovision scenarios: a StatefulSet manager (with its headless Service), and misconfigured
// twins whose image cannot be pulled, one with a StatefulSet and one with a Deployment. Only for planes with nodes.
import type { KubeConfig } from '@kubernetes/client-node';
import { DEFAULTS } from '@skr-watcher/api';
import type { ModuleVersion } from '@skr-watcher/oci';
import { stringify } from 'yaml';
import { createCatalog, publishModules, standInOperator } from './modules.js';

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

/** The manager: its readiness probe starts only after a few seconds, so every rollout has a moment not Ready. */
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
        standInOperator('manager', image, {
          httpGet: { path: '/', port: 8080 },
          initialDelaySeconds: 3,
          periodSeconds: 1,
        }),
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
