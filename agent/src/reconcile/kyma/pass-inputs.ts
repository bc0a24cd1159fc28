// The no-op rule of a Kyma's pass (decision 029): a pass whose inputs are those of the last full pass of the Kyma,
// run within the re-apply interval, leaves the SKR alone. The SKR webhook watches every object the agent installed,
// so drift reaches the agent as a callback (and a targeted revert) instead of waiting for the next pass to re-apply
// an unchanged set. The inputs are what the pass reads in the KCP (the Kyma's spec and labels, the catalog, the
// Watchers, ModuleConfigs, SyncResources, Manifests, the PKI Secrets, the image pull Secret, the KCP Secrets the
// deployer's Secrets take their data from), the SKR Kyma's spec and labels, and the SKR client; they are summed up in
// one digest.
//
// The last full pass is remembered in this replica's memory only, and only saves work: a Kyma it does not know (a
// restart, a takeover, a Kyma the router put in doubt) gets a full pass, which is what a restart must do anyway, since
// callbacks may have been missed meanwhile.
import { createHash } from 'node:crypto';
import type { Kyma, ModuleConfig, RawSyncResource, Watcher } from '@skr-watcher/api';
import type { ClusterClient } from '@skr-watcher/kube';
import { resourceVersionOf, type ReconcileContext } from '../context.js';
import type { Catalog } from '../modules/catalog.js';
import { injectionSourceVersions } from '../manifests/inject-data-from-kcp.js';

/** The one-hour safety net: a Kyma at rest still gets its whole state re-applied this often. */
export const DEFAULT_FULL_REAPPLY_MS = 60 * 60_000;

/** What a Kyma's last full pass read, and when it ran. */
interface FullPassRecord {
  digest: string;
  atMs: number;
}

/** The last full pass of each Kyma this replica ran that ended Ready: one digest and one instant per Kyma. */
export class FullPasses {
  private readonly last = new Map<string, FullPassRecord>();

  /** `reapplyAfterMs` 0: every pass is a full one. */
  constructor(readonly reapplyAfterMs: number = DEFAULT_FULL_REAPPLY_MS) {}

  /** Whether the Kyma's last full pass read these inputs, less than the re-apply interval ago. */
  covers(kymaKey: string, digest: string, nowMs: number): boolean {
    const last = this.last.get(kymaKey);
    return last !== undefined && last.digest === digest && nowMs - last.atMs < this.reapplyAfterMs;
  }

  record(kymaKey: string, digest: string, nowMs: number): void {
    if (this.reapplyAfterMs > 0) this.last.set(kymaKey, { digest, atMs: nowMs });
  }

  /**
   * The Kyma's next pass is a full one: something its inputs do not show may have changed in the SKR (drift, a Module
   * CR without a ModuleConfig yet, a callback from a webhook that does not say what changed), or the Kyma is gone.
   */
  distrust(kymaKey: string): void {
    this.last.delete(kymaKey);
  }

  get size(): number {
    return this.last.size;
  }
}

/** What a pass has read before its SKR steps: the inputs of the no-op rule. */
export interface PassInputs {
  kyma: Kyma;
  skrKyma: Kyma;
  skr: ClusterClient;
  catalog: Catalog;
  watchers: readonly Watcher[];
  configs: ReadonlyMap<string, ModuleConfig>;
  syncs: readonly RawSyncResource[];
}

const clientIds = new WeakMap<ClusterClient, number>();
let nextClientId = 0;

/** A number per SKR client: a rebuilt client (a new kubeconfig, another SKR) is another input. */
function clientId(skr: ClusterClient): number {
  let id = clientIds.get(skr);
  if (id === undefined) {
    id = ++nextClientId;
    clientIds.set(skr, id);
  }
  return id;
}

/** `name@resourceVersion` of each object: any write of one is a change. */
function versions(objects: Iterable<{ metadata: { name: string; resourceVersion?: string | undefined } }>) {
  return [...objects].map((object) => `${object.metadata.name}@${object.metadata.resourceVersion ?? ''}`);
}

/** What a full pass would read but the SKR does not hold: the Kyma's own fields and its SyncResources' specs. */
function specAndMetadata(object: {
  metadata: { generation?: number | undefined; labels?: unknown; annotations?: unknown };
  spec?: unknown;
}) {
  const { generation, labels, annotations } = object.metadata;
  return [generation ?? null, labels ?? null, annotations ?? null, object.spec ?? null];
}

/**
 * The digest of a pass's inputs; undefined when one of them cannot be known without reading the SKR (Manifests not in
 * the controller's cache while modules are installed), so the pass is a full one.
 *
 * Writes that only the pass itself makes are left out where they would make every pass after a change look new: the
 * status of the Kymas and SyncResources (generation, labels and annotations instead of the resourceVersion), and the
 * SKR Kyma's annotations (the webhook's probe). The SKR Kyma's spec is the user's: read on every pass, one GET.
 */
export async function passInputsDigest(
  ctx: ReconcileContext,
  inputs: PassInputs,
): Promise<string | undefined> {
  const kymaName = inputs.kyma.metadata.name;
  const manifests = ctx.modules ? ctx.caches?.manifests?.(kymaName) : [];
  if (manifests === undefined) return undefined;
  const pki = ctx.registration?.pki;
  const parts = [
    clientId(inputs.skr),
    specAndMetadata(inputs.kyma),
    [inputs.skrKyma.metadata.labels ?? null, inputs.skrKyma.spec],
    versions(inputs.catalog.templates),
    versions(inputs.catalog.metas),
    versions(inputs.watchers),
    versions(inputs.configs.values()),
    inputs.syncs.map((sync) => [sync.metadata.name, ...specAndMetadata(sync)]),
    manifests.map((manifest) => resourceVersionOf(manifest) ?? ''),
    pki
      ? [
          pki.ca()?.secret.metadata?.resourceVersion ?? '',
          pki.bundle() ?? '',
          pki.leaf(kymaName)?.resourceVersion ?? '',
        ]
      : null,
    await pullSecretVersion(ctx),
    await injectionSourceVersions(ctx, manifests),
  ];
  return createHash('sha256').update(JSON.stringify(parts)).digest('base64');
}

/** The KCP image pull Secret's resourceVersion: the SKR copy follows it. */
async function pullSecretVersion(ctx: ReconcileContext): Promise<string | null> {
  const name = ctx.modules?.skrImagePullSecret;
  if (!name) return null;
  try {
    return (
      (await ctx.kcp.core.readNamespacedSecret({ name, namespace: ctx.namespace })).metadata
        ?.resourceVersion ?? ''
    );
  } catch {
    // Missing or unreadable: the full pass reports it.
    return 'unread';
  }
}

/**
 * Whether the KCP Kyma's status lets a pass rest: Ready (a pass in any other state has something to look at, on its
 * own schedule), and no module held for a maintenance window (the window opens with time, not with an input).
 */
export function statusAtRest(kyma: Kyma): boolean {
  const status = kyma.status;
  return status?.state === 'Ready' && !(status.modules ?? []).some((module) => module.maintenance === true);
}
