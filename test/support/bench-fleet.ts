// The agent benches' fleet: N Kymas in one KCP namespace, each with its own kubeconfig Secret (so its own SKR
// client in the agent) and its own SKR namespace, spread round-robin over the given SKR API servers.
import type { KubeConfig } from '@kubernetes/client-node';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS } from '@skr-watcher/api';

export interface BenchFleet {
  kcp: KubeConfig;
  namespace: string;
  kymas: number;
  /** kubeconfig YAML of each SKR API server; Kyma i uses kubeconfigs[i % length]. */
  kubeconfigs: string[];
  /** Extra labels on every Kyma (e.g. skip-reconciliation). */
  labels?: Record<string, string>;
  /** runtime-id of Kyma i (default `runtime-<i>`); Kymas that share an SKR may share its runtime-id. */
  runtimeId?: (i: number) => string;
  /** Modules every Kyma enables (default none). */
  modules?: { name: string }[];
  /** Modules Kyma i enables instead of `modules` (e.g. the sample module on every tenth). */
  modulesOf?: (i: number) => { name: string }[];
  /** `spec.sync.moduleCatalog` of every Kyma (unset: the agent's default, a copy of the catalog in the SKR). */
  moduleCatalog?: boolean;
}

/** Creates the namespace's Secrets and Kymas `kyma-<i>` (runtime-id `runtime-<i>`), 16 at a time. */
export async function createBenchFleet(fleet: BenchFleet): Promise<void> {
  const core = fleet.kcp.makeApiClient(CoreV1Api);
  const api = fleet.kcp.makeApiClient(CustomObjectsApi);
  const { namespace } = fleet;
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < fleet.kymas) {
        const i = next++;
        const name = `kyma-${i}`;
        await core.createNamespacedSecret({
          namespace,
          body: {
            metadata: { name: `kubeconfig-${name}`, namespace, labels: { [LABELS.kymaName]: name } },
            stringData: { config: fleet.kubeconfigs[i % fleet.kubeconfigs.length] as string },
          },
        });
        await api.createNamespacedCustomObject({
          group: GROUP,
          version: KINDS.kyma.version,
          plural: KINDS.kyma.plural,
          namespace,
          body: {
            apiVersion: `${GROUP}/${KINDS.kyma.version}`,
            kind: 'Kyma',
            metadata: {
              name,
              namespace,
              labels: { [LABELS.runtimeId]: fleet.runtimeId?.(i) ?? `runtime-${i}`, ...fleet.labels },
            },
            spec: {
              channel: 'regular',
              modules: fleet.modulesOf?.(i) ?? fleet.modules ?? [],
              sync: {
                namespace: `bench-${i}`,
                ...(fleet.moduleCatalog === undefined ? {} : { moduleCatalog: fleet.moduleCatalog }),
              },
            },
          },
        });
      }
    }),
  );
}

export interface BenchAgentRun {
  /** The KCP kubeconfig file. */
  kubeconfig: string;
  namespace: string;
  /** host:port of /metrics (`127.0.0.1:0` when the bench finds the port itself). */
  metricsAddress: string;
  workers: string;
  /** --resync-interval (the full pass over every Kyma the benches time). */
  resync: string;
  /** The listener's flags (listenerFlags of agent/test/support); `--no-listener` without them. */
  listener?: string[];
}

/**
 * The `skr-agent run` arguments every agent bench starts with: no listener unless given (the benches enqueue by
 * watch and resync), events on a free loopback port, Ready Kymas requeued only hourly so the resync is the one full pass.
 */
export function benchAgentRunArgs(run: BenchAgentRun): string[] {
  return [
    'run',
    '--kubeconfig',
    run.kubeconfig,
    '--namespace',
    run.namespace,
    ...(run.listener ?? ['--no-listener']),
    '--metrics-address',
    run.metricsAddress,
    '--events-address',
    '127.0.0.1:0',
    '--workers',
    run.workers,
    '--requeue-ready',
    '1h',
    '--resync-interval',
    run.resync,
  ];
}
