// A module whose raw manifest holds a ConfigMap and a Deployment, for the drift test and bench:drift:
// in a process-only system no node runs the Deployment, so the module is applied and never Ready.
import { DEFAULTS } from '@skr-watcher/api';
import { stringify } from 'yaml';

export const DRIFTER = {
  module: 'drifter',
  namespace: DEFAULTS.skrNamespace,
  configMap: 'drifter-config',
  deployment: 'drifter-operator',
  installedData: { mode: 'as-installed' },
} as const;

export function drifterModule() {
  const labels = { 'app.kubernetes.io/name': DRIFTER.deployment };
  const objects = [
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: DRIFTER.configMap, namespace: DRIFTER.namespace },
      data: DRIFTER.installedData,
    },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: DRIFTER.deployment, namespace: DRIFTER.namespace, labels },
      spec: {
        replicas: 1,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: { containers: [{ name: 'operator', image: 'drifter:1.0.0' }] },
        },
      },
    },
  ];
  return {
    moduleName: DRIFTER.module,
    version: '1.0.0',
    channels: ['regular'],
    ocmComponentName: `kyma-project.io/module/${DRIFTER.module}`,
    rawManifest: objects.map((object) => stringify(object)).join('---\n'),
  };
}
