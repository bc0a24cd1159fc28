// Verifying a leaf against a trust bundle at a given instant, with the reason when it fails.
import { describeCertificate, parseCertificate, type CertificateInfo } from './describe.js';
import { bundleCertificates } from './bundle.js';

export type LeafRejection =
  | 'not-yet-valid'
  | 'expired'
  | 'is-a-ca'
  | 'missing-usage'
  | 'unknown-issuer'
  | 'bad-signature'
  | 'issuer-not-valid';

export type LeafVerification =
  | { ok: true; leaf: CertificateInfo; issuer: CertificateInfo }
  | { ok: false; leaf: CertificateInfo; reason: LeafRejection; message: string };

export interface VerifyLeafOptions {
  now?: Date;
  /** Extended key usages the leaf must carry; SKR leaves carry both. */
  usages?: ('serverAuth' | 'clientAuth')[];
}

export function verifyLeaf(
  leafPem: string,
  bundlePem: string,
  opts: VerifyLeafOptions = {},
): LeafVerification {
  const now = opts.now ?? new Date();
  const leafX509 = parseCertificate(leafPem, 'leaf certificate');
  const leaf = describeCertificate(leafX509);
  const reject = (reason: LeafRejection, message: string): LeafVerification => ({
    ok: false,
    leaf,
    reason,
    message,
  });

  if (leaf.isCa) return reject('is-a-ca', `certificate ${leaf.commonName} is a CA, not a leaf`);
  if (now < leaf.notBefore)
    return reject('not-yet-valid', `not valid before ${leaf.notBefore.toISOString()}`);
  if (now >= leaf.notAfter) return reject('expired', `expired at ${leaf.notAfter.toISOString()}`);
  for (const usage of opts.usages ?? []) {
    if (!leaf.extendedKeyUsages.includes(usage))
      return reject('missing-usage', `extended key usage ${usage} missing`);
  }

  let sawIssuerName = false;
  let issuerExpired: CertificateInfo | undefined;
  for (const caPem of bundleCertificates(bundlePem)) {
    const ca = parseCertificate(caPem, 'CA bundle entry');
    // checkIssued compares names, key identifiers and the CA's key usage, as OpenSSL's chain builder does.
    if (!ca.ca || !leafX509.checkIssued(ca)) continue;
    sawIssuerName = true;
    if (!leafX509.verify(ca.publicKey)) continue;
    const issuer = describeCertificate(ca);
    if (now < issuer.notBefore || now >= issuer.notAfter) {
      issuerExpired = issuer;
      continue;
    }
    return { ok: true, leaf, issuer };
  }
  if (issuerExpired) {
    return reject(
      'issuer-not-valid',
      `issuer ${issuerExpired.commonName} is not valid at ${now.toISOString()}`,
    );
  }
  if (sawIssuerName)
    return reject('bad-signature', `no CA named ${leaf.issuerCommonName} in the bundle signed it`);
  return reject('unknown-issuer', `issuer ${leaf.issuerCommonName} is not in the CA bundle`);
}

/** Whether `caPem` signed `leafPem` (names, key identifiers and signature). */
export function isSignedBy(leafPem: string, caPem: string): boolean {
  const leaf = parseCertificate(leafPem, 'leaf certificate');
  const ca = parseCertificate(caPem, 'CA certificate');
  return leaf.checkIssued(ca) && leaf.verify(ca.publicKey);
}
