// The KCP PKI Secrets a registration pass reads, from watches instead of three GETs per pass (decision 016):
// the CA Secret and its bundle (two objects for every Kyma, watched in full by name) and each Kyma's
// leaf `<kyma>-webhook-tls` (watched as metadata only; the leaf is read by name when its resourceVersion is not the
// one last read or written here, and kept parsed per Kyma). Only a pass that changes nothing decides from these:
// certificate.ts reads everything fresh before it issues or reports, and reads fresh while a watch has not listed.
import type { KubeConfig, V1Secret } from '@kubernetes/client-node';
import { LABELS } from '@skr-watcher/api';
import {
  bundleOfSecret,
  caOfSecret,
  metadataOnly,
  parsedOnce,
  ResilientInformer,
  secretSource,
  type CaSecret,
  type PartialObjectMetadata,
} from '@skr-watcher/kube';
import {
  CA_BUNDLE_SECRET_NAME,
  CA_SECRET_NAME,
  kymaNameOfWebhookTlsSecret,
  webhookTlsSecretName,
  describeCertificate,
  type CertificateInfo,
} from '@skr-watcher/pki';
import type { Logger, Registry } from '@skr-watcher/telemetry';
import { reportCertificates } from '../certificate-metrics.js';

/** A leaf as this replica last read or wrote it, with what a no-op pass derives from it. */
export interface KnownLeaf {
  resourceVersion: string;
  certPem: string;
  keyPem: string;
  /** describeCertificate(certPem), once. */
  info?: CertificateInfo;
  /** isSignedBy(certPem, caPem) by CA PEM, once per CA. */
  signedBy?: Map<string, boolean>;
}

export interface PkiCache {
  /** The CA Secret at the watch's version; undefined while the watch has not listed it (or it does not exist). */
  ca(): CaSecret | undefined;
  /** The trust bundle at the watch's version; undefined as for `ca`. */
  bundle(): string | undefined;
  /** The Kyma's leaf when the watch shows it at the version remembered here; undefined otherwise (read it). */
  leaf(kymaName: string): KnownLeaf | undefined;
  /** The leaf as just read or written, at `resourceVersion`. */
  remember(kymaName: string, leaf: KnownLeaf): void;
  /** Drops what is known of the Kyma's leaf (deleted, or taken over from another replica). */
  forget(kymaName: string): void;
  start(): void;
  stop(): Promise<void>;
}

/** CA PEMs a leaf's signature was checked against; more than this and the memo starts over (a rotation or two). */
const SIGNED_BY_MEMO = 4;

export function memoSignedBy(leaf: KnownLeaf, caPem: string, check: () => boolean): boolean {
  leaf.signedBy ??= new Map();
  let signed = leaf.signedBy.get(caPem);
  if (signed === undefined) {
    if (leaf.signedBy.size >= SIGNED_BY_MEMO) leaf.signedBy.clear();
    signed = check();
    leaf.signedBy.set(caPem, signed);
  }
  return signed;
}

export function watchPkiSecrets(options: {
  kubeConfig: KubeConfig;
  /** KCP namespace of the CA and certificate Secrets. */
  namespace: string;
  logger?: Logger;
  registry?: Registry;
  /**
   * Called when the CA Secret or the trust bundle changes (a rotation step, `init-ca`): every SKR's webhook must get
   * the new bundle, and only a Kyma's pass gives it one, so the agent wakes every pass it owns.
   */
  onTrustChange?: (secret: string) => void;
}): PkiCache {
  const { kubeConfig, namespace } = options;
  const defaults = { kubeConfig, logger: options.logger, registry: options.registry };
  const byName = (resource: string, name: string) =>
    new ResilientInformer<V1Secret>({
      ...defaults,
      source: {
        ...secretSource(kubeConfig, { namespace, fieldSelector: `metadata.name=${name}` }),
        resource,
      },
    });
  const caSecret = byName('secrets-ca', CA_SECRET_NAME);
  const bundleSecret = byName('secrets-ca-bundle', CA_BUNDLE_SECRET_NAME);
  // Every agent writes leaves labelled with their Kyma and typed kubernetes.io/tls (pki-secrets.ts); one made
  // otherwise is not watched and is read on every pass, as before. Only the name and version are kept.
  const leafVersions = new ResilientInformer<PartialObjectMetadata>({
    ...defaults,
    source: metadataOnly(kubeConfig, {
      ...secretSource(kubeConfig, {
        namespace,
        labelSelector: LABELS.kymaName,
        fieldSelector: 'type=kubernetes.io/tls',
      }),
      resource: 'secrets-webhook-tls',
    }),
    transform: (secret) => ({
      metadata: {
        name: secret.metadata?.name,
        namespace: secret.metadata?.namespace,
        resourceVersion: secret.metadata?.resourceVersion,
      },
    }),
  });
  if (options.onTrustChange) {
    const changed = options.onTrustChange;
    for (const [informer, name] of [
      [caSecret, CA_SECRET_NAME],
      [bundleSecret, CA_BUNDLE_SECRET_NAME],
    ] as const) {
      informer.addHandler({
        onAdd: () => changed(name),
        onUpdate: (previous, secret) => {
          if (previous.metadata?.resourceVersion !== secret.metadata?.resourceVersion) changed(name);
        },
        onDelete: () => changed(name),
      });
    }
  }
  const known = new Map<string, KnownLeaf>();
  leafVersions.addHandler({
    onDelete: (secret) => {
      const kymaName = kymaNameOfWebhookTlsSecret(secret.metadata?.name ?? '');
      if (kymaName !== undefined) known.delete(kymaName);
    },
  });
  const informers = [caSecret, bundleSecret, leafVersions] as ResilientInformer<PartialObjectMetadata>[];
  // Expiry of the CA and of the leaves known here, for Prometheus (decision 023).
  const unreport = options.registry
    ? reportCertificates(options.registry, {
        pem: { ca: () => parsedCa()?.current.certPem },
        *leaves() {
          for (const leaf of known.values()) {
            try {
              leaf.info ??= describeCertificate(leaf.certPem);
            } catch {
              continue;
            }
            yield leaf.info.notAfter;
          }
        },
      })
    : undefined;

  const held = (informer: ResilientInformer<V1Secret>, name: string) =>
    informer.hasSynced ? informer.get(`${namespace}/${name}`) : undefined;
  const parsedCa = () => {
    const secret = held(caSecret, CA_SECRET_NAME);
    try {
      return secret && parsedOnce(secret, 'ca', () => caOfSecret(secret));
    } catch {
      return undefined;
    }
  };
  return {
    ca() {
      const secret = held(caSecret, CA_SECRET_NAME);
      return secret && parsedOnce(secret, 'ca', () => caOfSecret(secret));
    },
    bundle() {
      const secret = held(bundleSecret, CA_BUNDLE_SECRET_NAME);
      return secret && parsedOnce(secret, 'ca-bundle', () => bundleOfSecret(secret));
    },
    leaf(kymaName) {
      if (!leafVersions.hasSynced) return undefined;
      const shown = leafVersions.get(`${namespace}/${webhookTlsSecretName(kymaName)}`)?.metadata
        ?.resourceVersion;
      const leaf = known.get(kymaName);
      return shown !== undefined && leaf?.resourceVersion === shown ? leaf : undefined;
    },
    remember(kymaName, leaf) {
      known.set(kymaName, leaf);
    },
    forget(kymaName) {
      known.delete(kymaName);
    },
    start() {
      for (const informer of informers) informer.start();
    },
    async stop() {
      unreport?.();
      await Promise.all(informers.map((informer) => informer.stop()));
      known.clear();
    },
  };
}
