// The KCP side of the PKI for a local system: the CA and trust bundle Secrets the agent issues SKR
// certificates from (the layout `skr-certs init-ca --kubeconfig` writes), and the listener's serving
// certificate for 127.0.0.1, signed by that CA so the webhooks can verify the listener. The Secrets go
// through the same KcpPkiSecrets the agent reads them with.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { KcpPkiSecrets } from '@skr-watcher/kube';
import { CA_IN_BUNDLE_SINCE_ANNOTATION, addToBundle, createCa, issueLeafAsync } from '@skr-watcher/pki';

export interface ListenerCertificateFiles {
  certFile: string;
  keyFile: string;
}

/**
 * Creates `skr-watcher-ca` and `skr-watcher-ca-bundle` in `namespace` and writes the listener's serving
 * certificate to `dir`. RSA 2048 for the CA: a throwaway local CA need not cost the seconds of 4096 bits.
 */
export async function initKcpPki(
  kcp: KubeConfig,
  namespace: string,
  dir: string,
): Promise<ListenerCertificateFiles> {
  const now = new Date();
  // A year: the agent renews leaves with 30 days left, and a leaf cannot outlive its CA.
  const ca = createCa({ commonName: 'skr-watcher local CA', keyBits: 2048, validityDays: 365, now });
  const secrets = new KcpPkiSecrets(kcp.makeApiClient(CoreV1Api), namespace);
  await secrets.createCa(ca, { [CA_IN_BUNDLE_SINCE_ANNOTATION]: now.toISOString() });
  await secrets.writeBundle(addToBundle('', ca.certPem));
  const serving = await issueLeafAsync({
    ca,
    runtimeId: 'skr-agent-listener',
    dnsNames: ['localhost'],
    ipAddresses: ['127.0.0.1'],
    validityDays: 30,
    now,
  });
  await mkdir(dir, { recursive: true });
  const files = { certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'tls.key') };
  await writeFile(files.certFile, serving.certPem);
  await writeFile(files.keyFile, serving.keyPem, { mode: 0o600 });
  return files;
}
