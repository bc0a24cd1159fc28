// Where a pass takes its KCP Kyma from (decision 016): the caller's watch cache, but only at the resourceVersion this
// agent last read from the API server or wrote, so no pass decides from a copy older than its own last write;
// otherwise a GET. The versions known are the one piece of memory the reconcile layer keeps between passes, and it
// only chooses between the cache and a GET: a missing or other entry costs one read, never a wrong write.
import { parseKyma, type Kyma } from '@skr-watcher/api';
import { getCustomObject } from '@skr-watcher/kube';
import { parseKymaKey, refOf, resourceVersionOf, type ReconcileContext } from './context.js';

export class KymaReads {
  /** resourceVersion by Kyma key (namespace/name), as last read fresh or written here. */
  private readonly known = new Map<string, string>();

  constructor(
    private readonly namespace: string,
    /** The Kyma `namespace/name` from the caller's watch cache (the owned Kymas), if it has one; parsed here. */
    private readonly cached?: (kymaKey: string) => unknown,
  ) {}

  /** The KCP Kyma a pass works from: the watch cache's copy at the known version, else read from etcd. */
  async forPass(ctx: ReconcileContext, kymaKey: string): Promise<Kyma | undefined> {
    const cached = this.cached?.(kymaKey);
    const version = this.known.get(kymaKey);
    if (cached !== undefined && version !== undefined && resourceVersionOf(cached) === version) {
      const kyma = parseKyma(cached, `Kyma ${kymaKey}`);
      // Deletion decides what goes and drops the finalizer: it reads fresh, whatever the cache shows.
      if (!kyma.metadata.deletionTimestamp) return kyma;
    }
    const { namespace, name } = parseKymaKey(kymaKey, this.namespace);
    const raw = await getCustomObject(ctx.kcp.custom, refOf('kyma', namespace, name));
    if (raw === undefined) return undefined;
    const kyma = parseKyma(raw, `Kyma ${kymaKey}`);
    this.remember(kymaKey, kyma.metadata.resourceVersion);
    return kyma;
  }

  /** The version a pass just wrote (or read); undefined forgets it. */
  remember(kymaKey: string, resourceVersion: string | undefined): void {
    if (resourceVersion) this.known.set(kymaKey, resourceVersion);
    else this.known.delete(kymaKey);
  }

  /** Gone, deleted, failed (a write may have landed unanswered) or taken over: the next pass reads it fresh. */
  forget(kymaKey: string): void {
    this.known.delete(kymaKey);
  }
}
