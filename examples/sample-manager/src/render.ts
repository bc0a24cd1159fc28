// The sample module's rendering: the Sample CR's spec (greeting, replicas) as a ConfigMap in the SKR's kyma-system,
// a kind and namespace inside the lifecycle manager's default allow-list for SyncResources.
import type { ModuleConfig, RenderedObject } from '@skr-watcher/module-manager';

/** The manager's name (its field manager and condition prefix), module and version. */
export const SAMPLE_MANAGER = { name: 'sample-manager', module: 'sample', version: '0.1.0' } as const;

/** Where the rendered configuration lands in every SKR. */
export const SAMPLE_CONFIG_MAP = { namespace: 'kyma-system', name: 'sample-config' } as const;

/** One ConfigMap per Sample CR. Fields of the spec other than greeting and replicas are not rendered. */
export function renderSample(config: ModuleConfig): RenderedObject[] {
  const spec = config.spec.resource.spec ?? {};
  const data: Record<string, string> = { module: config.spec.module };
  if (typeof spec['greeting'] === 'string') data['greeting'] = spec['greeting'];
  if (typeof spec['replicas'] === 'number') data['replicas'] = String(spec['replicas']);
  return [
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        ...SAMPLE_CONFIG_MAP,
        labels: { 'app.kubernetes.io/name': 'sample', 'app.kubernetes.io/managed-by': 'sample-manager' },
      },
      data,
    },
  ];
}
