// The SKR webhook's certificate in KCP (`<kyma>-webhook-tls`): issued from the signing CA, renewed with 30 days
// left, re-issued after a CA rotation or when its names changed. Read fresh on every reconcile, or from watches
// (pki-cache.ts) for a pass that changes nothing.
import { KcpPkiSecrets, type CaSecret, type ClusterClient } from '@skr-watcher/kube';
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
} from '@skr-watcher/pki';
import { memoSignedBy, type KnownLeaf, type PkiCache } from './pki-cache.js';

/** The leaf and the CA bundle the SKR is to trust, or why there is none (the SKRWebhook condition's reason). */
export type SkrCertificate =
  | { ok: true; leaf: { certPem: string; keyPem: string }; bundlePem: string; issued?: string }
  | { ok: false; reason: string; message: string };

export interface SkrCertificateInput {
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
  /** The PKI Secrets from watches (pki-cache.ts); without it every pass reads the three Secrets. */
  cache?: PkiCache;
}

export async function ensureSkrCertificate(input: SkrCertificateInput): Promise<SkrCertificate> {
  const secrets = new KcpPkiSecrets(input.kcp.core, input.namespace);
  const { cache, kymaName } = input;
  if (cache) {
    // A pass that changes nothing decides from the watches; one that would issue, or report a problem, reads
    // everything fresh and decides again (decision 006: what decides a write is read fresh).
    const fromWatches = await certify(input, {
      ca: async () => cache.ca() ?? (await secrets.readCa()),
      bundle: async () => cache.bundle() ?? (await secrets.readBundle()),
      leaf: async () => cache.leaf(kymaName) ?? (await readLeaf(secrets, input)),
    });
    if (fromWatches !== 'decide-fresh') return fromWatches;
  }
  return certify(
    input,
    { ca: () => secrets.readCa(), bundle: () => secrets.readBundle(), leaf: () => readLeaf(secrets, input) },
    secrets,
  );
}

interface PkiReads {
  ca(): Promise<CaSecret | undefined>;
  bundle(): Promise<string | undefined>;
  leaf(): Promise<KnownLeaf | undefined>;
}

/** The leaf read from the API server, remembered in the cache at the version read. */
async function readLeaf(secrets: KcpPkiSecrets, input: SkrCertificateInput): Promise<KnownLeaf | undefined> {
  const stored = await secrets.readLeaf(input.kymaName);
  if (!stored) return undefined;
  const leaf = {
    resourceVersion: stored.resourceVersion ?? '',
    certPem: stored.certPem,
    keyPem: stored.keyPem,
  };
  if (stored.resourceVersion) input.cache?.remember(input.kymaName, leaf);
  return leaf;
}

/**
 * Decides on the leaf from `reads` and, with `writer`, issues what is due. Without a writer, anything but a valid leaf
 * under a usable CA answers 'decide-fresh'.
 */
function certify(input: SkrCertificateInput, reads: PkiReads, writer: KcpPkiSecrets): Promise<SkrCertificate>;
function certify(input: SkrCertificateInput, reads: PkiReads): Promise<SkrCertificate | 'decide-fresh'>;
async function certify(
  input: SkrCertificateInput,
  reads: PkiReads,
  writer?: KcpPkiSecrets,
): Promise<SkrCertificate | 'decide-fresh'> {
  const { runtimeId, urlMode } = input;
  const ca = await reads.ca();
  const bundlePem = await reads.bundle();
  if (!ca || !bundlePem) {
    if (!writer) return 'decide-fresh';
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
  const leaf = await reads.leaf();
  const decision = leaf
    ? decideOnLeaf(
        leaf,
        // A leaf rotate-ca already moved to the CA it is introducing is fine too: no churn back and forth.
        [signing.certPem, ...(ca.pending ? [ca.pending.certPem] : [])],
        runtimeId,
        dnsNames,
        ipAddresses,
        input.now,
        inBundleSince,
      )
    : { action: 'issue', reason: 'no certificate yet' };
  if (leaf && decision.action === 'none') return { ok: true, leaf, bundlePem };
  if (!writer) return 'decide-fresh';

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
  const fresh = issueLeaf({ ca: signing, runtimeId, dnsNames, ipAddresses, now: input.now });
  const resourceVersion = await writer.writeLeaf(input.kymaName, fresh, bundlePem);
  if (resourceVersion)
    input.cache?.remember(input.kymaName, { resourceVersion, certPem: fresh.certPem, keyPem: fresh.keyPem });
  else input.cache?.forget(input.kymaName);
  return { ok: true, leaf: fresh, bundlePem, issued: decision.reason };
}

function decideOnLeaf(
  leaf: KnownLeaf,
  acceptedCaPems: string[],
  runtimeId: string,
  dnsNames: string[],
  ipAddresses: string[],
  now: Date,
  inBundleSince: Date | undefined,
): { action: string; reason: string } {
  // Parsed and verified once per leaf (and CA) the cache keeps; every time for a leaf read without one.
  const info = (leaf.info ??= describeCertificate(leaf.certPem));
  const sameNames = (a: string[], b: string[]) => [...a].sort().join(',') === [...b].sort().join(',');
  if (info.commonName !== runtimeId)
    return { action: 'reissue', reason: `runtime-id changed to ${runtimeId}` };
  if (!sameNames(info.dnsNames, dnsNames) || !sameNames(info.ipAddresses, ipAddresses)) {
    return { action: 'reissue', reason: 'names changed' };
  }
  return decideLeaf(info, {
    now,
    currentCaInBundleSince: inBundleSince,
    signedByCurrentCa: acceptedCaPems.some((caPem) =>
      memoSignedBy(leaf, caPem, () => isSignedBy(leaf.certPem, caPem)),
    ),
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
