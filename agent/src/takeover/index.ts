// Taking a fleet over from upstream lifecycle-manager without re-installing anything (decision 028), one Kyma at a
// time and in this order:
//   manifests.ts       each Manifest adopted in place: SKR objects' field ownership, then finalizers
//   kyma-finalizers.ts the KCP Kyma's finalizers: lifecycle-manager's swapped for the agent's
//   webhook.ts         upstream's SKR webhook replaced by the agent's, upstream's leftovers removed once ours serves
//   certificates.ts    upstream's certificate of the SKR in KCP removed once the agent's webhook serves
//   field-ownership.ts moving server-side apply ownership between field managers without a content write
// Every step reads what is there and is idempotent: a takeover that stopped half-way is run again.
import { DEFAULTS, GROUP, KINDS, type Kyma } from '@skr-watcher/api';
import type { ClusterClient, SkrClients } from '@skr-watcher/kube';
import type { Logger } from '@skr-watcher/telemetry';
import { removeUpstreamCertificate } from './certificates.js';
import { swapKymaFinalizers, type KymaFinalizerSwap } from './kyma-finalizers.js';
import { manifestsOfKyma, takeOverManifest, type ManifestTakeover } from './manifests.js';
import { handBackWebhook, handOverWebhook, type WebhookHandover } from './webhook.js';

export { transferFieldOwnership, transferredEntries, unionOfFields } from './field-ownership.js';
export { takeOverManifest } from './manifests.js';
export { swapKymaFinalizers } from './kyma-finalizers.js';
export { handBackWebhook, handOverWebhook } from './webhook.js';
export { removeUpstreamCertificate } from './certificates.js';

export interface TakeoverContext {
  kcp: ClusterClient;
  skrClients: Pick<SkrClients, 'forKyma'>;
  /** KCP namespace of the Kymas and Manifests. */
  namespace: string;
  /** Namespace of the webhook in every SKR. */
  skrNamespace?: string;
  /** KCP namespace of lifecycle-manager's SKR certificates (its `--istio-namespace`, istio-system by default). */
  certificateNamespace?: string;
  /** Adopt the Manifests only; leave the webhook and certificates as they are. */
  manifestsOnly?: boolean;
  /**
   * Rollback: Manifests and their objects back to lifecycle-manager's names, and the agent's webhook removed once
   * lifecycle-manager's serves again. The agent's certificate Secret in KCP stays.
   */
  handBack?: boolean;
  dryRun?: boolean;
  logger: Logger;
}

/** What the takeover of one Kyma did, and whether anything of upstream's is left to hand over. */
export interface KymaTakeover {
  kyma: string;
  done: boolean;
  manifests: ManifestTakeover[];
  /** The KCP Kyma's finalizers (`deleting`: left as they are, see kyma-finalizers.ts). */
  kymaFinalizers?: KymaFinalizerSwap;
  webhook?: WebhookHandover;
  certificates: string[];
  /** Why nothing could be done in the SKR. */
  error?: string;
}

/** Upstream's default namespace of its SKR certificates. */
export const UPSTREAM_CERTIFICATE_NAMESPACE = 'istio-system';

/** One Kyma taken over (or handed back), as far as it can be now. */
export async function takeOverKyma(ctx: TakeoverContext, kyma: Kyma): Promise<KymaTakeover> {
  const name = kyma.metadata.name;
  const result: KymaTakeover = { kyma: name, done: false, manifests: [], certificates: [] };
  const skr = await ctx.skrClients.forKyma(name);
  if (!skr) return { ...result, error: 'no kubeconfig Secret for this Kyma' };
  for (const manifest of await manifestsOfKyma(ctx.kcp, ctx.namespace, name))
    result.manifests.push(await takeOverManifest(ctx, skr.client, manifest));
  // After the Manifests: a Kyma deleted half-way through is then removed by the agent, Manifests included.
  result.kymaFinalizers = await swapKymaFinalizers(ctx.kcp, ctx.namespace, name, ctx);
  if (ctx.manifestsOnly) return { ...result, done: true };

  const skrNamespace = ctx.skrNamespace ?? DEFAULTS.skrNamespace;
  result.webhook = ctx.handBack
    ? await handBackWebhook(skr.client, skrNamespace, ctx.dryRun)
    : await handOverWebhook(skr.client, kyma, skrNamespace, ctx.dryRun);
  if (result.webhook.state !== 'done') return result;
  if (ctx.handBack) return { ...result, done: true };
  result.certificates = await removeUpstreamCertificate(
    ctx.kcp,
    ctx.certificateNamespace ?? UPSTREAM_CERTIFICATE_NAMESPACE,
    name,
    ctx.dryRun,
  );
  return { ...result, done: true };
}

/** The Kymas of the namespace, or the named ones. */
export async function kymasToTakeOver(
  kcp: ClusterClient,
  namespace: string,
  names: readonly string[] | undefined,
): Promise<Kyma[]> {
  const list = (await kcp.custom.listNamespacedCustomObject({
    group: GROUP,
    version: KINDS.kyma.version,
    namespace,
    plural: KINDS.kyma.plural,
  })) as { items?: Kyma[] };
  const kymas = list.items ?? [];
  if (!names || names.length === 0) return kymas;
  const missing = names.filter((wanted) => !kymas.some((kyma) => kyma.metadata.name === wanted));
  if (missing.length > 0) throw new Error(`no Kyma ${missing.join(', ')} in namespace ${namespace}`);
  return kymas.filter((kyma) => names.includes(kyma.metadata.name));
}
