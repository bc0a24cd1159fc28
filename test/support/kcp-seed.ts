// Seeds a KCP namespace for agent tests: the sample module's template and release meta, and per SKR a kubeconfig
// Secret and a Kyma (runtime-id = SKR name) that enables the sample module.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS } from '@skr-watcher/api';
import type { Environment } from '@skr-watcher/testenv';
import { parse as parseYaml } from 'yaml';

/** Where the sample module's Module CR lives in an SKR (the template's spec.data). */
export const SAMPLE_MODULE_CR = {
  group: GROUP,
  version: KINDS.sample.version,
  plural: KINDS.sample.plural,
  namespace: 'kyma-system',
  name: 'sample',
};

const SAMPLES = fileURLToPath(new URL('../../manifests/samples/', import.meta.url));

export async function seedKcp(env: Environment, namespace: string, skrs: readonly string[]): Promise<void> {
  const kcp = env.plane('kcp').kubeConfig();
  const core = kcp.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: namespace } } });
  await seedSampleCatalog(kcp, namespace);
  for (const skr of skrs) {
    await seedKyma(kcp, namespace, skr, await readFile(env.plane(skr).kubeconfigPath, 'utf8'));
  }
}

/**
 * The sample module's ModuleTemplate and ModuleReleaseMeta in a KCP namespace. `moduleCrPerKyma`: the template's
 * Module CR has no namespace, so each Kyma's lands in its own SKR namespace (`spec.sync.namespace`).
 */
export async function seedSampleCatalog(
  kcp: KubeConfig,
  namespace: string,
  options: { moduleCrPerKyma?: boolean } = {},
): Promise<void> {
  const api = kcp.makeApiClient(CustomObjectsApi);
  for (const file of ['moduletemplate-sample-1.0.0.yaml', 'modulereleasemeta-sample.yaml']) {
    const body = parseYaml(await readFile(join(SAMPLES, file), 'utf8')) as {
      kind: string;
      metadata: { namespace: string };
      spec: { data?: { metadata?: { namespace?: string } } };
    };
    body.metadata.namespace = namespace;
    if (options.moduleCrPerKyma) delete body.spec.data?.metadata?.namespace;
    const kind = body.kind === 'ModuleTemplate' ? KINDS.moduleTemplate : KINDS.moduleReleaseMeta;
    await api.createNamespacedCustomObject({
      group: GROUP,
      version: kind.version,
      plural: kind.plural,
      namespace,
      body,
    });
  }
}

/** A kubeconfig Secret and a Kyma (runtime-id = name) enabling the sample module, for any SKR address. */
export async function seedKyma(
  kcp: KubeConfig,
  namespace: string,
  name: string,
  kubeconfig: string,
  /** Merged into the Kyma's spec (e.g. `sync`), and its runtime-id when it should differ from the name. */
  more: { spec?: Record<string, unknown>; runtimeId?: string } = {},
): Promise<void> {
  await kcp.makeApiClient(CoreV1Api).createNamespacedSecret({
    namespace,
    body: {
      metadata: { name: `kubeconfig-${name}`, namespace, labels: { [LABELS.kymaName]: name } },
      stringData: { config: kubeconfig },
    },
  });
  await kcp.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    group: GROUP,
    version: KINDS.kyma.version,
    plural: KINDS.kyma.plural,
    namespace,
    body: {
      apiVersion: `${GROUP}/${KINDS.kyma.version}`,
      kind: 'Kyma',
      metadata: { name, namespace, labels: { [LABELS.runtimeId]: more.runtimeId ?? name } },
      spec: { channel: 'regular', modules: [{ name: 'sample' }], ...more.spec },
    },
  });
}
