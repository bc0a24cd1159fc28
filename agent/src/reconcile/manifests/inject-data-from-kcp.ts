// Upstream's deployer module image pull Secret injection (its DeployerModuleImagePullSecret transform): a Secret of
// the `deployer` module's raw manifest annotated `operator.kyma-project.io/inject-data-from-kcp: "true"` is applied
// with the data of the KCP Secret of the same name, so the module's published manifest carries only a placeholder
// and the real registry credentials stay in the KCP. On only when `deployer` is in --restricted-default-modules, as
// upstream's. The KCP Secret must carry `operator.kyma-project.io/module-name: deployer`, so that a module cannot
// read a Secret meant for another; any other module's annotated Secrets are applied as published. Upstream's error
// texts are kept (the Manifest's lastOperation), as its tests and runbooks read them.
import type { V1Secret } from '@kubernetes/client-node';
import { ANNOTATIONS, isRecord, LABELS, type Manifest } from '@skr-watcher/api';
import {
  isNotFound,
  KubeRequestError,
  type ClusterClient,
  type SetMember,
  type Transform,
} from '@skr-watcher/kube';
import type { ModuleInstallation } from '../context.js';

/** The one module whose Secrets may take data from the KCP: upstream reserves the injection for it. */
export const DEPLOYER_MODULE = 'deployer';

/** Upstream's umbrella text, the start of every error this injection reports. */
export const INJECT_DATA_FROM_KCP_FAILED = 'inject-data-from-kcp transform failed';

/** The data of the KCP Secrets to inject, by the name of the Secret of the raw manifest that receives it. */
export type InjectedData = ReadonlyMap<string, Record<string, string>>;

/** Nothing to inject: every module but the deployer, or the feature off. */
const NOTHING: InjectedData = new Map();

/** A misconfiguration of the deployer's Secrets in the KCP: the module's Error until someone fixes the KCP Secret. */
export class InjectDataFromKcpError extends Error {
  constructor(detail: string, options?: ErrorOptions) {
    super(`${INJECT_DATA_FROM_KCP_FAILED}: ${detail}`, options);
    this.name = 'InjectDataFromKcpError';
  }
}

/** Whether the injection applies to this Manifest's module: it is the deployer, listed as a restricted module. */
export function injectsDataFromKcp(
  manifest: Manifest,
  installation: Pick<ModuleInstallation, 'restrictedModules'>,
): boolean {
  return (
    installation.restrictedModules?.has(DEPLOYER_MODULE) === true &&
    manifest.metadata.labels?.[LABELS.moduleName] === DEPLOYER_MODULE
  );
}

function isInjectable(object: SetMember): boolean {
  return object.kind === 'Secret' && object.metadata.annotations?.[ANNOTATIONS.injectDataFromKcp] === 'true';
}

/**
 * The KCP data for every annotated Secret among `objects`, read from the KCP namespace; empty when the injection does
 * not apply. A KCP Secret that is missing or not labelled for the module is an InjectDataFromKcpError; a KCP that
 * does not answer is a KubeRequestError (the pass fails and is retried).
 */
export async function dataToInject(
  kcp: Pick<ClusterClient, 'core'>,
  namespace: string,
  manifest: Manifest,
  installation: Pick<ModuleInstallation, 'restrictedModules'>,
  objects: readonly SetMember[],
): Promise<InjectedData> {
  if (!injectsDataFromKcp(manifest, installation)) return NOTHING;
  const injected = new Map<string, Record<string, string>>();
  for (const object of objects.filter(isInjectable)) {
    const name = object.metadata.name;
    if (injected.has(name)) continue;
    const source = await kcpSecret(kcp, namespace, name);
    const labelled = source.metadata?.labels?.[LABELS.moduleName];
    if (labelled === undefined)
      throw new InjectDataFromKcpError(
        `kcp source secret is missing the required ${LABELS.moduleName} label: secret=${name}`,
      );
    if (labelled !== DEPLOYER_MODULE)
      throw new InjectDataFromKcpError(
        `kcp source secret ${LABELS.moduleName} label does not match the manifest module: secret=${name} expected=${DEPLOYER_MODULE} actual=${labelled}`,
      );
    injected.set(name, { ...source.data });
  }
  return injected;
}

async function kcpSecret(
  kcp: Pick<ClusterClient, 'core'>,
  namespace: string,
  name: string,
): Promise<V1Secret> {
  try {
    return await kcp.core.readNamespacedSecret({ name, namespace });
  } catch (error) {
    const failure = new KubeRequestError(`read Secret ${namespace}/${name}`, error);
    if (!isNotFound(error)) throw failure;
    const detail = `failed to fetch kcp secret ${JSON.stringify(name)}: ${failure.message}`;
    throw new InjectDataFromKcpError(detail, { cause: failure });
  }
}

/**
 * Gives each annotated Secret its KCP data in place of the published one. `stringData` goes too: the API server
 * would merge it over `data`, and the KCP's data is to be all the Secret holds.
 */
export function injectDataFromKcp(injected: InjectedData): Transform {
  return (object) => {
    const data = isInjectable(object) ? injected.get(object.metadata.name) : undefined;
    if (!data) return object;
    const { stringData: _published, ...rest } = object as SetMember & { stringData?: unknown };
    return { ...rest, data: { ...data } };
  };
}

/**
 * For the no-op rule of a Kyma's pass (kyma/pass-inputs.ts): `name@resourceVersion` of the KCP Secrets that the
 * Secrets of the deployer's set (its Manifest's `status.synced`) may take data from, so that credentials rotated in
 * the KCP make the next pass a full one. Null when the injection is off or the Kyma has no deployer.
 */
export async function injectionSourceVersions(
  ctx: {
    kcp: Pick<ClusterClient, 'core'>;
    namespace: string;
    modules?: Pick<ModuleInstallation, 'restrictedModules'>;
  },
  manifests: readonly unknown[],
): Promise<string[] | null> {
  if (!ctx.modules?.restrictedModules?.has(DEPLOYER_MODULE)) return null;
  const names = [...new Set(manifests.flatMap(deployerSecretNames))].sort();
  if (names.length === 0) return null;
  return Promise.all(
    names.map(async (name) => {
      try {
        const secret = await ctx.kcp.core.readNamespacedSecret({ name, namespace: ctx.namespace });
        return `${name}@${secret.metadata?.resourceVersion ?? ''}`;
      } catch (error) {
        // Gone or unreadable: the full pass reports it (a KCP that does not answer fails that pass too).
        return `${name}@${isNotFound(error) ? 'absent' : 'unread'}`;
      }
    }),
  );
}

/** The Secrets a cached Manifest of the deployer applied; none for any other Manifest. */
function deployerSecretNames(manifest: unknown): string[] {
  if (!isRecord(manifest) || !isRecord(manifest['metadata']) || !isRecord(manifest['status'])) return [];
  const labels = manifest['metadata']['labels'];
  if (!isRecord(labels) || labels[LABELS.moduleName] !== DEPLOYER_MODULE) return [];
  const synced = manifest['status']['synced'];
  if (!Array.isArray(synced)) return [];
  return synced.flatMap((entry: unknown) =>
    isRecord(entry) && entry['kind'] === 'Secret' && !entry['group'] && typeof entry['name'] === 'string'
      ? [entry['name']]
      : [],
  );
}
