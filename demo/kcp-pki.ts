// The KCP side of the PKI for a local system: the CA and trust bundle Secrets the agent issues SKR
// certificates from (the layout `skr-certs init-ca --kubeconfig` writes, through the same KcpPkiSecrets the
// agent reads them with), and a keeper of the listener's serving certificate for 127.0.0.1 in the Secret
// `skr-agent-listener-tls`, signed by the current CA, as cert-manager would keep it in a real KCP.
import { CoreV1Api, type KubeConfig, type V1Secret } from '@kubernetes/client-node';
import { LABELS, MANAGED_BY } from '@skr-watcher/api';
import { KcpPkiSecrets, ResilientInformer, secretSource } from '@skr-watcher/kube';
import {
  CA_IN_BUNDLE_SINCE_ANNOTATION,
  CA_SECRET_NAME,
  addToBundle,
  createCa,
  isSignedBy,
  issueLeafAsync,
} from '@skr-watcher/pki';

/** KCP Secret with the listener's serving certificate (`tls.crt`, `tls.key`). */
export const LISTENER_TLS_SECRET = 'skr-agent-listener-tls';

/**
 * Creates `skr-watcher-ca` and `skr-watcher-ca-bundle` in `namespace`. RSA 2048: a throwaway local CA need
 * not cost the seconds of 4096 bits. A year: the agent renews leaves with 30 days left, and a leaf cannot
 * outlive its CA.
 */
export async function initKcpCa(kcp: KubeConfig, namespace: string): Promise<void> {
  const now = new Date();
  const ca = createCa({ commonName: 'skr-watcher local CA', keyBits: 2048, validityDays: 365, now });
  const secrets = new KcpPkiSecrets(kcp.makeApiClient(CoreV1Api), namespace);
  await secrets.createCa(ca, { [CA_IN_BUNDLE_SINCE_ANNOTATION]: now.toISOString() });
  await secrets.writeBundle(addToBundle('', ca.certPem));
}

export interface ListenerCertificateKeeper {
  /** Resolves once the Secret holds a certificate from the current CA; rejects after `timeoutMs`. */
  ready(timeoutMs: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Keeps `skr-agent-listener-tls` signed by the current CA of `skr-watcher-ca`. It follows the CA that signs
 * (`tls.crt`), not one a rotation is still introducing: by the time signing switches, every SKR's bundle
 * holds the new CA, so the webhooks verify the re-issued listener certificate without a gap.
 */
export function keepListenerCertificate(
  kcp: KubeConfig,
  namespace: string,
  onError: (error: Error) => void,
): ListenerCertificateKeeper {
  const core = kcp.makeApiClient(CoreV1Api);
  const secrets = new KcpPkiSecrets(core, namespace);
  const informer = new ResilientInformer<V1Secret>({
    kubeConfig: kcp,
    source: secretSource(kcp, { namespace }),
    transform: (secret) => ({ metadata: secret.metadata }),
    watchdogMs: 60_000,
  });
  let current = false;
  const waiters: (() => void)[] = [];
  let running: Promise<void> = Promise.resolve();

  const converge = async () => {
    const ca = await secrets.readCa();
    if (!ca) return;
    const existing = await core
      .readNamespacedSecret({ name: LISTENER_TLS_SECRET, namespace })
      .catch((error: unknown) => {
        if ((error as { code?: unknown }).code === 404) return undefined;
        throw new Error(`read Secret ${namespace}/${LISTENER_TLS_SECRET}`, { cause: error });
      });
    const certB64 = existing?.data?.['tls.crt'];
    const certPem = certB64 ? Buffer.from(certB64, 'base64').toString('utf8') : '';
    let signedByCurrent = false;
    try {
      signedByCurrent = certPem !== '' && isSignedBy(certPem, ca.current.certPem);
    } catch {
      // Not a certificate: replace it.
    }
    if (!signedByCurrent) {
      const serving = await issueLeafAsync({
        ca: ca.current,
        runtimeId: 'skr-agent-listener',
        dnsNames: ['localhost'],
        ipAddresses: ['127.0.0.1'],
        validityDays: 30,
      });
      const body: V1Secret = {
        apiVersion: 'v1',
        kind: 'Secret',
        type: 'kubernetes.io/tls',
        metadata: {
          name: LISTENER_TLS_SECRET,
          namespace,
          labels: { [LABELS.managedBy]: MANAGED_BY },
          ...(existing?.metadata?.resourceVersion
            ? { resourceVersion: existing.metadata.resourceVersion }
            : {}),
        },
        stringData: { 'tls.crt': serving.certPem, 'tls.key': serving.keyPem },
      };
      try {
        if (existing) await core.replaceNamespacedSecret({ name: LISTENER_TLS_SECRET, namespace, body });
        else await core.createNamespacedSecret({ namespace, body });
      } catch (cause) {
        throw new Error(`write Secret ${namespace}/${LISTENER_TLS_SECRET}`, { cause });
      }
    }
    current = true;
    for (const wake of waiters.splice(0)) wake();
  };

  const consider = (secret: V1Secret) => {
    const name = secret.metadata?.name;
    if (name !== CA_SECRET_NAME && name !== LISTENER_TLS_SECRET) return;
    // Serialised: a conflict from a racing pass is resolved by the pass its own write triggers.
    running = running.then(converge).catch((error: unknown) => onError(error as Error));
  };
  informer.addHandler({
    onAdd: consider,
    onUpdate: (_, secret) => consider(secret),
    onDelete: consider,
  });
  informer.start();

  return {
    ready(timeoutMs) {
      if (current) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () =>
            reject(
              new Error(
                `Secret ${namespace}/${LISTENER_TLS_SECRET} was not issued within ${Math.round(timeoutMs / 1000)} s`,
              ),
            ),
          timeoutMs,
        );
        waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
    async stop() {
      await informer.stop();
      await running;
    },
  };
}
