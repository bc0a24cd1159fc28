// The owner label on Kymas as this replica writes it: one merge patch conditional on the resourceVersion it decided
// on, taken into our view at once; which keys have a write in flight, and which writes our view does not show a
// later version of yet, so that no assignment pass writes them again.
import { PatchStrategy, setHeaderOptions, type CustomObjectsApi } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS } from '@skr-watcher/api';
import { objectKey } from '@skr-watcher/kube';
import type { Logger } from '@skr-watcher/telemetry';
import { ownerOf, type KymaOwnership } from './kyma-owners.js';

export type OwnerLabelApi = Pick<CustomObjectsApi, 'patchNamespacedCustomObject'>;

export interface OwnerLabelsOptions {
  api: OwnerLabelApi;
  /** Of Kymas cached without one. */
  namespace: string;
  /** Takes a written Kyma into our view ahead of its watch event. */
  observeWritten: (written: unknown) => void;
  logger?: Logger | undefined;
}

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export class OwnerLabels {
  /** Relabels in flight, so a pass does not write the same Kyma twice. */
  private readonly writing = new Set<string>();
  /**
   * Owner labels this replica wrote, by key: the resourceVersion the write was conditional on. Until our cache shows
   * a later version, a write conditional on that one again can only meet a conflict (on a loaded KCP the watch event
   * of a claim can come seconds after it, and passes run meanwhile): no pass writes it.
   */
  private readonly wrote = new Map<string, string | undefined>();

  constructor(private readonly options: OwnerLabelsOptions) {}

  /** True while a write of the key is in flight. */
  busy(key: string): boolean {
    return this.writing.has(key);
  }

  /** A write of the key is decided on; until `done`, passes leave it alone. */
  begin(key: string): void {
    this.writing.add(key);
  }

  done(key: string): void {
    this.writing.delete(key);
  }

  /** True when we wrote the owner of this very version of the Kyma: our view will show the next one. */
  awaitingOwnWrite(kyma: KymaOwnership): boolean {
    const key = objectKey(kyma);
    return this.wrote.has(key) && this.wrote.get(key) === kyma.metadata.resourceVersion;
  }

  /** Our view shows another version of the key (or none): writes may go again. */
  forget(key: string): void {
    this.wrote.delete(key);
  }

  /** One PATCH of the owner label, conditional on the resourceVersion of `kyma`. */
  async write(kyma: KymaOwnership, owner: string): Promise<void> {
    const key = objectKey(kyma);
    const written: unknown = await this.options.api.patchNamespacedCustomObject(
      {
        group: GROUP,
        version: KINDS.kyma.version,
        plural: KINDS.kyma.plural,
        namespace: kyma.metadata.namespace ?? this.options.namespace,
        name: kyma.metadata.name,
        body: {
          metadata: {
            resourceVersion: kyma.metadata.resourceVersion,
            labels: { [LABELS.shardOwner]: owner },
          },
        },
      },
      mergePatch,
    );
    this.wrote.set(key, kyma.metadata.resourceVersion);
    this.options.logger?.debug({ kyma: key, from: ownerOf(kyma), to: owner }, 'Kyma owner written');
    // Our view takes the label now, not when its watch event comes: seconds later on a KCP busy with a takeover's
    // claims, and a callback waiting for the claim would be answered 503 meanwhile.
    this.options.observeWritten(written);
  }
}
