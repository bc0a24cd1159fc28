// The samples of manifests/samples applied to a KCP: the module catalog, the Watcher, and per SKR a Kyma
// (made from kyma.yaml, which describes "skr1") with its kubeconfig Secret.
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { ANNOTATIONS, DEFAULTS, GROUP, KINDS, LABELS } from '@skr-watcher/api';
import { parseAllDocuments } from 'yaml';
import { z } from 'zod';

export const SAMPLES_DIR = fileURLToPath(new URL('../../../manifests/samples/', import.meta.url));
const KYMA_SAMPLE = 'kyma.yaml';

const manifestShape = z.looseObject({
  apiVersion: z.string(),
  kind: z.string(),
  metadata: z.looseObject({
    name: z.string(),
    namespace: z.string().optional(),
    labels: z.record(z.string(), z.string()).optional(),
    annotations: z.record(z.string(), z.string()).optional(),
  }),
});
type Manifest = z.infer<typeof manifestShape>;

export interface SkrRegistration {
  /** Kyma name and runtime-id (the CN of the SKR's certificate). */
  name: string;
  /** Content of the SKR's kubeconfig file: the agent's only way into the SKR. */
  kubeconfig: string;
  /** https://127.0.0.1:<port> of the webhook process that serves this SKR (URL mode); none: in-cluster. */
  webhookUrl?: string;
}

async function readManifests(file: string): Promise<Manifest[]> {
  const text = await readFile(join(SAMPLES_DIR, file), 'utf8');
  return parseAllDocuments(text)
    .map((document) => document.toJS() as unknown)
    .filter((value) => value !== null)
    .map((value) => {
      const parsed = manifestShape.safeParse(value);
      if (!parsed.success)
        throw new Error(`${file}: not a Kubernetes object: ${z.prettifyError(parsed.error)}`);
      return parsed.data;
    });
}

/** The Kyma of one SKR, from the sample that describes skr1. */
export function kymaFor(sample: Manifest, skr: SkrRegistration, namespace: string): Manifest {
  return {
    ...sample,
    metadata: {
      ...sample.metadata,
      name: skr.name,
      namespace,
      labels: { ...sample.metadata.labels, [LABELS.runtimeId]: skr.name },
      annotations: {
        ...sample.metadata.annotations,
        [ANNOTATIONS.skrDomain]: `${skr.name}.local.kyma.dev`,
        ...(skr.webhookUrl ? { [ANNOTATIONS.skrWebhookUrl]: skr.webhookUrl } : {}),
      },
    },
  };
}

const KIND_BY_NAME = new Map<string, { plural: string; version: string }>(
  Object.values(KINDS).map((kind) => [kind.kind, kind]),
);

async function create(api: CustomObjectsApi, manifest: Manifest, namespace: string): Promise<void> {
  const kind = KIND_BY_NAME.get(manifest.kind);
  if (!kind || manifest.apiVersion !== `${GROUP}/${kind.version}`) {
    throw new Error(
      `sample ${manifest.kind}/${manifest.metadata.name}: not a kind of ${GROUP} this demo knows`,
    );
  }
  const body = { ...manifest, metadata: { ...manifest.metadata, namespace } };
  try {
    await api.createNamespacedCustomObject({
      group: GROUP,
      version: kind.version,
      plural: kind.plural,
      namespace,
      body,
    });
  } catch (cause) {
    throw new Error(`create ${manifest.kind} ${namespace}/${manifest.metadata.name}`, { cause });
  }
}

/** Applies the catalog and the Watcher, then a kubeconfig Secret and a Kyma per SKR (Kymas last: they start the work). */
export async function applySamples(
  kcp: KubeConfig,
  skrs: SkrRegistration[],
  namespace = DEFAULTS.kcpNamespace,
) {
  const api = kcp.makeApiClient(CustomObjectsApi);
  const core = kcp.makeApiClient(CoreV1Api);
  const files = (await readdir(SAMPLES_DIR)).filter((f) => f.endsWith('.yaml') && f !== KYMA_SAMPLE).sort();
  for (const file of files) {
    for (const manifest of await readManifests(file)) await create(api, manifest, namespace);
  }
  const [kymaSample] = await readManifests(KYMA_SAMPLE);
  if (!kymaSample) throw new Error(`${KYMA_SAMPLE} holds no Kyma`);
  for (const skr of skrs) {
    const secretName = `kubeconfig-${skr.name}`;
    await core
      .createNamespacedSecret({
        namespace,
        body: {
          metadata: { name: secretName, namespace, labels: { [LABELS.kymaName]: skr.name } },
          stringData: { [DEFAULTS.kubeconfigSecretKey]: skr.kubeconfig },
        },
      })
      .catch((cause: unknown) => {
        throw new Error(`create Secret ${namespace}/${secretName}`, { cause });
      });
    await create(api, kymaFor(kymaSample, skr, namespace), namespace);
  }
}
