// The SKR webhook's certificate in KCP (`<kyma>-webhook-tls`): issued from the signing CA, renewed with 30 days
// left, re-issued after a CA rotation or when its names changed. Read fresh on every reconcile.
import { KcpPkiSecrets, type ClusterClient } from '@skr-watcher/kube';
import {
  CA_IN_BUNDLE_SINCE_ANNOTATION,
  decideLeaf,
  describeCertificate,
  isSignedBy,
  issueLeaf,
  parseTimestamp,
  RENEW_BEFORE_MS,
  rotationStateFromAnnotations,
  signingCaFor,
  webhookDnsNames,
  webhookTlsSecretName,
} from '@skr-watcher/pki';

/** The leaf and the CA bundle the SKR is to trust, or why there is none (the SKRWebhook condition's reason). */
export type SkrCertificate =
  | { ok: true; leaf: { certPem: string; keyPem: string }; bundlePem: string; issued?: string }
  | { ok: false; reason: string; message: string };

export async function ensureSkrCertificate(input: {
  kcp: ClusterClient;
  /** KCP namespace of the CA and certificate Secrets. */
  namespace: string;
  kymaName: string;
  runtimeId: string;
  /** The SKR's domain (annotation), named in the certificate. */
  domain: string | undefined;
  /** URL-mode webhook address; its IP, if it is one, becomes an IP SAN. */
  urlMode: string | undefined;
  now: Date;
}): Promise<SkrCertificate> {
  const { runtimeId, urlMode } = input;
  const secrets = new KcpPkiSecrets(input.kcp.core, input.namespace);

  const ca = await secrets.readCa();
  const bundlePem = await secrets.readBundle();
  if (!ca || !bundlePem) {
    return {
      ok: false,
      reason: 'NoCertificateAuthority',
      message: `no CA in Secret ${input.namespace}/skr-watcher-ca and its bundle; run skr-certs init-ca`,
    };
  }
  const rotation = rotationStateFromAnnotations(ca.annotations);
  const signing = signingCaFor(ca, rotation);
  const inBundleSinceRaw = ca.annotations[CA_IN_BUNDLE_SINCE_ANNOTATION];
  const inBundleSince = inBundleSinceRaw
    ? parseTimestamp(inBundleSinceRaw, CA_IN_BUNDLE_SINCE_ANNOTATION)
    : undefined;

  const dnsNames = webhookDnsNames(input.domain ? [input.domain] : []);
  const ipAddresses = urlMode ? ipAddressesOf(urlMode) : [];

  // The SKR's certificate in KCP: issue, renew or re-issue.
  let leaf = await secrets.readLeaf(input.kymaName);
  let issued: string | undefined;
  const decision = leaf
    ? decideOnLeaf(
        leaf.certPem,
        // A leaf rotate-ca already moved to the CA it is introducing is fine too: no churn back and forth.
        [signing.certPem, ...(ca.pending ? [ca.pending.certPem] : [])],
        runtimeId,
        dnsNames,
        ipAddresses,
        input.now,
        inBundleSince,
      )
    : { action: 'issue', reason: 'no certificate yet' };
  const caNotAfter = describeCertificate(signing.certPem).notAfter;
  if (decision.action === 'renew' && leaf && caNotAfter.getTime() - input.now.getTime() <= RENEW_BEFORE_MS) {
    // A new leaf cannot outlive its CA, so it would need renewal again at once: report instead of re-issuing
    // on every pass (each write would trigger the next).
    return {
      ok: false,
      reason: 'CertificateAuthorityExpiring',
      message: `the signing CA expires at ${caNotAfter.toISOString()}, so the SKR certificate (${decision.reason}) cannot be renewed; rotate the CA with skr-certs rotate-ca`,
    };
  }
  if (decision.action !== 'none') {
    const fresh = issueLeaf({ ca: signing, runtimeId, dnsNames, ipAddresses, now: input.now });
    await secrets.writeLeaf(input.kymaName, fresh, bundlePem);
    leaf = { certPem: fresh.certPem, keyPem: fresh.keyPem, caPem: bundlePem };
    issued = decision.reason;
  }
  if (!leaf)
    throw new Error(`certificate Secret ${input.namespace}/${webhookTlsSecretName(input.kymaName)} vanished`);

  return { ok: true, leaf, bundlePem, ...(issued ? { issued } : {}) };
}

function decideOnLeaf(
  certPem: string,
  acceptedCaPems: string[],
  runtimeId: string,
  dnsNames: string[],
  ipAddresses: string[],
  now: Date,
  inBundleSince: Date | undefined,
): { action: string; reason: string } {
  const info = describeCertificate(certPem);
  const sameNames = (a: string[], b: string[]) => [...a].sort().join(',') === [...b].sort().join(',');
  if (info.commonName !== runtimeId)
    return { action: 'reissue', reason: `runtime-id changed to ${runtimeId}` };
  if (!sameNames(info.dnsNames, dnsNames) || !sameNames(info.ipAddresses, ipAddresses)) {
    return { action: 'reissue', reason: 'names changed' };
  }
  return decideLeaf(info, {
    now,
    currentCaInBundleSince: inBundleSince,
    signedByCurrentCa: acceptedCaPems.some((caPem) => isSignedBy(certPem, caPem)),
  });
}

/** The IP address of a URL-mode webhook becomes an IP SAN (the API server checks it). */
function ipAddressesOf(url: string): string[] {
  try {
    const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
    return /^[\d.]+$|:/.test(host) ? [host] : [];
  } catch {
    return [];
  }
}
