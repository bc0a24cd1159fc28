// The KCP side of the PKI for a local system, in the Secrets and layout `skr-certs` and the agent use
// (through the same KcpPkiSecrets): the CA `skr-watcher-ca`, the trust bundle `skr-watcher-ca-bundle`, and the
// listener's serving certificate for 127.0.0.1 in `skr-agent-listener-tls`. `skr-certs rotate-ca` re-issues
// that certificate during a rotation; the listener follows it through the demo's Secret volume.
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { KcpPkiSecrets } from '@skr-watcher/kube';
import {
  CA_IN_BUNDLE_SINCE_ANNOTATION,
  LISTENER_TLS_SECRET_NAME,
  addToBundle,
  createCa,
  issueLeafAsync,
} from '@skr-watcher/pki';

export { LISTENER_TLS_SECRET_NAME };

/**
 * RSA 2048: a throwaway local CA need not cost the seconds of 4096 bits. A year: the agent renews leaves
 * with 30 days left, and a leaf cannot outlive its CA.
 */
export async function initKcpPki(
  kcp: KubeConfig,
  namespace: string,
  /** Names the SKRs dial the listener by (default 127.0.0.1; in pods: the KCP node's address). */
  listener: { dnsNames: string[]; ipAddresses: string[] } = {
    dnsNames: ['localhost'],
    ipAddresses: ['127.0.0.1'],
  },
): Promise<void> {
  const now = new Date();
  const ca = createCa({ commonName: 'skr-watcher local CA', keyBits: 2048, validityDays: 365, now });
  const secrets = new KcpPkiSecrets(kcp.makeApiClient(CoreV1Api), namespace);
  await secrets.createCa(ca, { [CA_IN_BUNDLE_SINCE_ANNOTATION]: now.toISOString() });
  const bundle = addToBundle('', ca.certPem);
  await secrets.writeBundle(bundle);
  const serving = await issueLeafAsync({
    ca,
    role: 'listener',
    ...listener,
    now,
  });
  await secrets.writeListenerLeaf(serving, bundle);
}
