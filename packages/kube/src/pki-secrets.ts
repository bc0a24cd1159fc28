// The KCP Secrets that hold the PKI (the CA, the trust bundle and the issued leaves), read and written through the
// Kubernetes API (CoreV1Api).
// Shared by skr-certs (init, issue, rotation) and the agent (per-SKR certificates during registration).
import type { CoreV1Api, V1Secret } from '@kubernetes/client-node';
import { LABELS, MANAGED_BY, byCodeUnit } from '@skr-watcher/api';
import {
  CA_BUNDLE_SECRET_NAME,
  CA_SECRET_NAME,
  LISTENER_TLS_SECRET_NAME,
  SECRET_KEYS,
  kymaNameOfWebhookTlsSecret,
  webhookTlsSecretName,
  type CertificateAndKey,
} from '@skr-watcher/pki';
import { isConflict, isNotFound } from './apply.js';

export interface CaSecret {
  current: CertificateAndKey;
  /** The CA a rotation is introducing (phase new-ca-pending .. leaves-reissued). */
  pending?: CertificateAndKey;
  /** The CA a rotation replaced (phase signing-switched), certificate only. */
  previousCertPem?: string;
  annotations: Record<string, string>;
  secret: V1Secret;
}

export interface LeafSecret {
  name: string;
  /** Empty for the listener's own certificate. */
  kymaName: string;
  certPem: string;
  /** The trust bundle handed to the SKR with this leaf. */
  caPem: string;
  secret: V1Secret;
}

function decode(secret: V1Secret, key: string): string | undefined {
  const value = secret.data?.[key];
  return value === undefined ? undefined : Buffer.from(value, 'base64').toString('utf8');
}

function required(secret: V1Secret, key: string): string {
  const value = decode(secret, key);
  if (value === undefined || value.trim() === '') {
    throw new Error(`Secret ${secret.metadata?.namespace}/${secret.metadata?.name} has no ${key}`);
  }
  return value;
}

function encode(data: Record<string, string | undefined>): Record<string, string> {
  const encoded: Record<string, string> = {};
  for (const [key, value] of Object.entries(data)) {
    if (value !== undefined) encoded[key] = Buffer.from(value, 'utf8').toString('base64');
  }
  return encoded;
}

/** A leaf as its Secret stores it, and the version it was read at. */
export interface StoredLeaf {
  certPem: string;
  keyPem: string;
  caPem: string;
  resourceVersion: string | undefined;
}

/** The CA Secret's generations and annotations (`skr-watcher-ca`, read or from a watch). */
export function caOfSecret(secret: V1Secret): CaSecret {
  const pendingCert = decode(secret, SECRET_KEYS.pendingCert);
  const pendingKey = decode(secret, SECRET_KEYS.pendingKey);
  return {
    current: { certPem: required(secret, SECRET_KEYS.cert), keyPem: required(secret, SECRET_KEYS.key) },
    pending: pendingCert && pendingKey ? { certPem: pendingCert, keyPem: pendingKey } : undefined,
    previousCertPem: decode(secret, SECRET_KEYS.previousCert),
    annotations: secret.metadata?.annotations ?? {},
    secret,
  };
}

/** The trust bundle of `skr-watcher-ca-bundle` (read or from a watch); empty when it has none. */
export function bundleOfSecret(secret: V1Secret): string {
  return decode(secret, SECRET_KEYS.bundle) ?? '';
}

export class KcpPkiSecrets {
  constructor(
    private readonly api: CoreV1Api,
    readonly namespace: string,
  ) {}

  /** Loads client-node on demand: it takes a second to import, and the file commands never need it. */
  static async fromKubeconfig(kubeconfigPath: string, namespace: string): Promise<KcpPkiSecrets> {
    const { CoreV1Api, KubeConfig } = await import('./pki-client.js');
    const kubeConfig = new KubeConfig();
    try {
      kubeConfig.loadFromFile(kubeconfigPath);
    } catch (cause) {
      throw new Error(`read kubeconfig ${kubeconfigPath}`, { cause });
    }
    return new KcpPkiSecrets(kubeConfig.makeApiClient(CoreV1Api), namespace);
  }

  private where(name: string): string {
    return `Secret ${this.namespace}/${name}`;
  }

  async read(name: string): Promise<V1Secret | undefined> {
    try {
      return await this.api.readNamespacedSecret({ name, namespace: this.namespace });
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw new Error(`read ${this.where(name)}`, { cause: error });
    }
  }

  async readCa(): Promise<CaSecret | undefined> {
    const secret = await this.read(CA_SECRET_NAME);
    return secret === undefined ? undefined : caOfSecret(secret);
  }

  /** Creates the CA Secret; fails when it exists (a CA is replaced by rotation, never overwritten). */
  async createCa(ca: CertificateAndKey, annotations: Record<string, string>): Promise<void> {
    const body: V1Secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'kubernetes.io/tls',
      metadata: {
        name: CA_SECRET_NAME,
        namespace: this.namespace,
        labels: { [LABELS.managedBy]: MANAGED_BY },
        annotations,
      },
      data: encode({ [SECRET_KEYS.cert]: ca.certPem, [SECRET_KEYS.key]: ca.keyPem }),
    };
    try {
      await this.api.createNamespacedSecret({ namespace: this.namespace, body });
    } catch (error) {
      if (isConflict(error)) {
        throw new Error(`${this.where(CA_SECRET_NAME)} already exists; replace a CA with rotate-ca`, {
          cause: error,
        });
      }
      throw new Error(`create ${this.where(CA_SECRET_NAME)}`, { cause: error });
    }
  }

  /**
   * Replaces the CA Secret's data and annotations, guarded by the resourceVersion it was read at, so two
   * rotations running at once cannot both write (the second gets a conflict).
   */
  async writeCa(
    read: CaSecret,
    next: { current: CertificateAndKey; pending?: CertificateAndKey; previousCertPem?: string },
    annotations: Record<string, string | null>,
  ): Promise<void> {
    const merged: Record<string, string> = { ...read.annotations };
    for (const [key, value] of Object.entries(annotations)) {
      if (value === null) delete merged[key];
      else merged[key] = value;
    }
    const body: V1Secret = {
      ...read.secret,
      metadata: { ...read.secret.metadata, annotations: merged },
      data: encode({
        [SECRET_KEYS.cert]: next.current.certPem,
        [SECRET_KEYS.key]: next.current.keyPem,
        [SECRET_KEYS.pendingCert]: next.pending?.certPem,
        [SECRET_KEYS.pendingKey]: next.pending?.keyPem,
        [SECRET_KEYS.previousCert]: next.previousCertPem,
      }),
    };
    try {
      await this.api.replaceNamespacedSecret({ name: CA_SECRET_NAME, namespace: this.namespace, body });
    } catch (error) {
      if (isConflict(error)) {
        throw new Error(`${this.where(CA_SECRET_NAME)} changed while rotating (another rotate-ca running?)`, {
          cause: error,
        });
      }
      throw new Error(`update ${this.where(CA_SECRET_NAME)}`, { cause: error });
    }
  }

  async readBundle(): Promise<string | undefined> {
    const secret = await this.read(CA_BUNDLE_SECRET_NAME);
    return secret === undefined ? undefined : bundleOfSecret(secret);
  }

  async writeBundle(bundlePem: string): Promise<void> {
    const data = encode({ [SECRET_KEYS.bundle]: bundlePem });
    const existing = await this.read(CA_BUNDLE_SECRET_NAME);
    try {
      if (existing === undefined) {
        await this.api.createNamespacedSecret({
          namespace: this.namespace,
          body: {
            apiVersion: 'v1',
            kind: 'Secret',
            type: 'Opaque',
            metadata: {
              name: CA_BUNDLE_SECRET_NAME,
              namespace: this.namespace,
              labels: { [LABELS.managedBy]: MANAGED_BY },
            },
            data,
          },
        });
      } else {
        await this.api.replaceNamespacedSecret({
          name: CA_BUNDLE_SECRET_NAME,
          namespace: this.namespace,
          body: { ...existing, data },
        });
      }
    } catch (error) {
      throw new Error(`write ${this.where(CA_BUNDLE_SECRET_NAME)}`, { cause: error });
    }
  }

  /**
   * The certificate, key and bundle of one SKR's `<kyma>-webhook-tls` and the Secret's resourceVersion, or undefined
   * when it has none.
   */
  async readLeaf(kymaName: string): Promise<StoredLeaf | undefined> {
    const secret = await this.read(webhookTlsSecretName(kymaName));
    const certPem = secret && decode(secret, SECRET_KEYS.cert);
    const keyPem = secret && decode(secret, SECRET_KEYS.key);
    if (!secret || !certPem || !keyPem) return undefined;
    return {
      certPem,
      keyPem,
      caPem: decode(secret, SECRET_KEYS.ca) ?? '',
      resourceVersion: secret.metadata?.resourceVersion,
    };
  }

  /** Every `<kyma>-webhook-tls` Secret of the namespace that holds a certificate. */
  async listLeaves(): Promise<LeafSecret[]> {
    const leaves: LeafSecret[] = [];
    let continueToken: string | undefined;
    do {
      let page;
      try {
        page = await this.api.listNamespacedSecret({
          namespace: this.namespace,
          limit: 500,
          _continue: continueToken,
        });
      } catch (error) {
        throw new Error(`list Secrets in namespace ${this.namespace}`, { cause: error });
      }
      for (const secret of page.items) {
        const name = secret.metadata?.name ?? '';
        // The listener's serving certificate is rotated like an SKR's; it belongs to no Kyma.
        const kymaName = name === LISTENER_TLS_SECRET_NAME ? '' : kymaNameOfWebhookTlsSecret(name);
        const certPem = decode(secret, SECRET_KEYS.cert);
        if (kymaName === undefined || certPem === undefined) continue;
        leaves.push({ name, kymaName, certPem, caPem: decode(secret, SECRET_KEYS.ca) ?? '', secret });
      }
      continueToken = page.metadata?._continue || undefined;
    } while (continueToken !== undefined);
    return leaves.sort((a, b) => byCodeUnit(a.name, b.name));
  }

  /** Writes `<kyma>-webhook-tls`, keeping the labels and annotations of an existing Secret; answers its new resourceVersion. */
  writeLeaf(kymaName: string, leaf: CertificateAndKey, bundlePem: string): Promise<string | undefined> {
    return this.writeLeafSecret(
      webhookTlsSecretName(kymaName),
      { [LABELS.kymaName]: kymaName },
      leaf,
      bundlePem,
    );
  }

  /** Writes the KCP listener's serving certificate (`skr-agent-listener-tls`), which rotations re-issue too. */
  async writeListenerLeaf(leaf: CertificateAndKey, bundlePem: string): Promise<void> {
    await this.writeLeafSecret(LISTENER_TLS_SECRET_NAME, {}, leaf, bundlePem);
  }

  private async writeLeafSecret(
    name: string,
    labels: Record<string, string>,
    leaf: CertificateAndKey,
    bundlePem: string,
  ): Promise<string | undefined> {
    const data = encode({
      [SECRET_KEYS.ca]: bundlePem,
      [SECRET_KEYS.cert]: leaf.certPem,
      [SECRET_KEYS.key]: leaf.keyPem,
    });
    const existing = await this.read(name);
    try {
      let written: V1Secret;
      if (existing === undefined) {
        written = await this.api.createNamespacedSecret({
          namespace: this.namespace,
          body: {
            apiVersion: 'v1',
            kind: 'Secret',
            type: 'kubernetes.io/tls',
            metadata: {
              name,
              namespace: this.namespace,
              labels: { ...labels, [LABELS.managedBy]: MANAGED_BY },
            },
            data,
          },
        });
      } else {
        written = await this.api.replaceNamespacedSecret({
          name,
          namespace: this.namespace,
          body: { ...existing, data },
        });
      }
      return written.metadata?.resourceVersion;
    } catch (error) {
      throw new Error(`write ${this.where(name)}`, { cause: error });
    }
  }

  /** Replaces the certificate, key and bundle of an existing leaf Secret (rotation), keeping its metadata. */
  rewriteLeaf(leaf: LeafSecret, issued: CertificateAndKey, bundlePem: string): Promise<void> {
    const ours = encode({
      [SECRET_KEYS.ca]: bundlePem,
      [SECRET_KEYS.cert]: issued.certPem,
      [SECRET_KEYS.key]: issued.keyPem,
    });
    return this.replaceLeafData(leaf, ours, `re-issue ${this.where(leaf.name)}`);
  }

  /** Replaces only `ca.crt` of a leaf Secret (the bundle gained or lost a CA). */
  writeLeafBundle(leaf: LeafSecret, bundlePem: string): Promise<void> {
    const ours = encode({ [SECRET_KEYS.ca]: bundlePem });
    return this.replaceLeafData(leaf, ours, `update ca.crt of ${this.where(leaf.name)}`);
  }

  /**
   * Overlays `ours` on a leaf Secret's data. The agent writes the same Secrets (it issues and renews leaves), so a
   * 409 is expected during a rotation: the Secret is read again and the write repeated on the fresh version.
   */
  private async replaceLeafData(leaf: LeafSecret, ours: Record<string, string>, what: string): Promise<void> {
    let secret = leaf.secret;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.api.replaceNamespacedSecret({
          name: leaf.name,
          namespace: this.namespace,
          body: { ...secret, data: { ...secret.data, ...ours } },
        });
        return;
      } catch (error) {
        if (!isConflict(error) || attempt >= LEAF_WRITE_ATTEMPTS) {
          const tries = attempt > 1 ? ` (${attempt} attempts)` : '';
          throw new Error(`${what}${tries}`, { cause: error });
        }
      }
      const fresh = await this.read(leaf.name);
      if (fresh === undefined) throw new Error(`${what}: the Secret was deleted meanwhile`);
      secret = fresh;
    }
  }
}

/** Writes of a leaf Secret that lose to a concurrent writer (409) are repeated this many times in all. */
const LEAF_WRITE_ATTEMPTS = 5;
