// Helpers shared by the reconcile suites: addresses of the project's custom objects and reads that wait out
// what a fresh control plane or watch cache needs a moment for.
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, KINDS } from '@skr-watcher/api';
import { startEnvironment, type Environment } from '@skr-watcher/testenv';

export function custom(kc: KubeConfig): CustomObjectsApi {
  return kc.makeApiClient(CustomObjectsApi);
}

/** Address of one of the project's custom objects for CustomObjectsApi. */
export function refTo(kind: keyof typeof KINDS, namespace: string, name: string) {
  const { version, plural } = KINDS[kind];
  return { group: GROUP, version, plural, namespace, name };
}

export const kymaRef = (namespace: string, name: string) => refTo('kyma', namespace, name);

/** A Kyma with no modules and these labels, for suites that need only its metadata; resolves to what was stored. */
export function createBareKyma(
  kc: KubeConfig,
  namespace: string,
  name: string,
  labels: Record<string, string>,
): Promise<unknown> {
  const { name: _name, ...ref } = kymaRef(namespace, name);
  return custom(kc).createNamespacedCustomObject({
    ...ref,
    body: {
      apiVersion: `${GROUP}/${KINDS.kyma.version}`,
      kind: 'Kyma',
      metadata: { name, namespace, labels },
      spec: { channel: 'regular', modules: [] },
    },
  });
}

/** One of the project's custom objects as JSON, undefined when absent. */
export async function readCustom(
  kc: KubeConfig,
  kind: keyof typeof KINDS,
  namespace: string,
  name: string,
): Promise<Record<string, unknown> | undefined> {
  return (await getOrUndefined(() => custom(kc).getNamespacedCustomObject(refTo(kind, namespace, name)))) as
    Record<string, unknown> | undefined;
}

/** Leaves an SKR's `namespace` as a fresh SKR's: no SKR Kyma (`default`), no Sample, no module catalog copies. */
export async function wipeSkrKyma(kc: KubeConfig, namespace: string): Promise<void> {
  await getOrUndefined(() => custom(kc).deleteNamespacedCustomObject(kymaRef(namespace, 'default')));
  for (const kind of ['sample', 'moduleTemplate', 'moduleReleaseMeta'] as const) {
    const { group, version, plural } = refTo(kind, namespace, '');
    const list = (await getOrUndefined(() =>
      custom(kc).listNamespacedCustomObject({ group, version, plural, namespace }),
    )) as { items: { metadata: { name: string } }[] } | undefined;
    for (const item of list?.items ?? [])
      await getOrUndefined(() =>
        custom(kc).deleteNamespacedCustomObject(refTo(kind, namespace, item.metadata.name)),
      );
  }
}

/** A read that answers undefined on 404 and waits out the 429 a fresh CRD answers for a moment. */
export async function getOrUndefined<T>(read: () => Promise<T>): Promise<T | undefined> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await read();
    } catch (error) {
      const code = (error as { code?: number }).code;
      if (code === 404) return undefined;
      // A fresh CRD answers 429 "storage is (re)initializing" for a moment.
      if (code !== 429 || attempt > 20) throw error;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

/**
 * The reconciler learns which Secrets and SyncResources exist from the API server's watch cache (as an informer
 * would); a test that creates one and reconciles at once waits until the cache has it, as a watch trigger would.
 */
export async function untilInWatchCache(
  list: () => Promise<{ items: { metadata?: { name?: string } }[] }>,
  name: string,
): Promise<void> {
  for (let attempt = 0; attempt < 250; attempt++) {
    if ((await list()).items.some((item) => item.metadata?.name === name)) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`${name} never reached the watch cache`);
}

/** Waits until every kind of the project answers lists on each plane (fresh CRDs answer 429 for a moment). */
export async function untilCrdsServe(planes: KubeConfig[]): Promise<void> {
  for (const kc of planes) {
    for (const kind of Object.keys(KINDS) as (keyof typeof KINDS)[]) {
      const { group, version, plural } = refTo(kind, 'default', '');
      await getOrUndefined(() =>
        custom(kc).listNamespacedCustomObject({ group, version, plural, namespace: 'default' }),
      );
    }
  }
}

/** A suite's KCP and one SKR (`skr1`), their CRDs serving; set once the suite's first `before` hook ran. */
export interface KcpAndSkr {
  env: Environment;
  kcp: KubeConfig;
  skr: KubeConfig;
  /** Run after each test, last added first. */
  cleanups: (() => Promise<void>)[];
}

/** Starts a KCP and an SKR before the calling suite's tests and stops them after; call in `describe`. */
export function kcpAndSkrForSuite(): KcpAndSkr {
  const planes = { cleanups: [] as (() => Promise<void>)[] } as KcpAndSkr;
  before(async () => {
    planes.env = await startEnvironment({ planes: ['kcp', 'skr1'] });
    planes.kcp = planes.env.plane('kcp').kubeConfig();
    planes.skr = planes.env.plane('skr1').kubeConfig();
    await untilCrdsServe([planes.kcp, planes.skr]);
  });
  afterEach(async () => {
    for (const cleanup of planes.cleanups.splice(0).reverse()) await cleanup();
  });
  after(async () => {
    await planes.env?.stop();
  });
  return planes;
}
