// Watches the ModuleConfigs in KCP and reports each mirrored Module CR spec the moment it arrives, so the
// demo and the benchmark can time an SKR edit's arrival in KCP.
import type { KubeConfig } from '@kubernetes/client-node';
import { GROUP, KINDS } from '@skr-watcher/api';
import { ResilientInformer, customResourceSource } from '@skr-watcher/kube';
import { z } from 'zod';

const moduleConfigShape = z.object({
  metadata: z.looseObject({ name: z.string(), resourceVersion: z.string().optional() }),
  spec: z.looseObject({
    kyma: z.string(),
    module: z.string(),
    resource: z.looseObject({ spec: z.record(z.string(), z.unknown()).optional() }),
  }),
});

export interface MirroredModule {
  kyma: string;
  module: string;
  /** The Module CR's spec as KCP holds it. */
  spec: Record<string, unknown>;
  /** When this process received the version that carries `spec`. */
  seenAtMs: number;
}

export interface ModuleConfigWatch {
  /** Resolves after the first complete list. */
  synced(): Promise<void>;
  current(kyma: string, module: string): MirroredModule | undefined;
  /** Calls `listener` for every new mirrored spec until the returned function is called. */
  subscribe(listener: (mirror: MirroredModule) => void): () => void;
  stop(): Promise<void>;
}

export function watchModuleConfigs(kcp: KubeConfig, namespace: string): ModuleConfigWatch {
  const informer = new ResilientInformer<{ metadata?: { name?: string } }>({
    kubeConfig: kcp,
    source: customResourceSource(kcp, {
      group: GROUP,
      version: KINDS.moduleConfig.version,
      plural: KINDS.moduleConfig.plural,
      namespace,
    }),
    watchdogMs: 60_000,
  });
  const latest = new Map<string, MirroredModule>();
  const listeners = new Set<(mirror: MirroredModule) => void>();
  const consider = (object: unknown) => {
    const seenAtMs = Date.now();
    const parsed = moduleConfigShape.safeParse(object);
    if (!parsed.success) return;
    const { kyma, module, resource } = parsed.data.spec;
    const mirror = { kyma, module, spec: resource.spec ?? {}, seenAtMs };
    const key = `${kyma}/${module}`;
    if (JSON.stringify(latest.get(key)?.spec) === JSON.stringify(mirror.spec)) return;
    latest.set(key, mirror);
    for (const listener of listeners) listener(mirror);
  };
  informer.addHandler({
    onAdd: consider,
    onUpdate: (_, object) => consider(object),
    onDelete: (object) => {
      const parsed = moduleConfigShape.safeParse(object);
      if (parsed.success) latest.delete(`${parsed.data.spec.kyma}/${parsed.data.spec.module}`);
    },
  });
  informer.start();
  return {
    synced: () => informer.waitForSync(),
    current: (kyma, module) => latest.get(`${kyma}/${module}`),
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    stop: () => informer.stop(),
  };
}
