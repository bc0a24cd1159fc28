// Trust bundles: the PEM concatenation of CA certificates that the listener and the SKRs trust.
import {
  describeCertificate,
  parseCertificate,
  splitPemCertificates,
  type CertificateInfo,
} from './describe.js';

/** Parses a bundle; an empty string is an empty bundle. */
export function bundleCertificates(bundlePem: string): string[] {
  return bundlePem.trim() === '' ? [] : splitPemCertificates(bundlePem, 'CA bundle');
}

function fingerprint(pem: string): string {
  return parseCertificate(pem, 'CA certificate').fingerprint256;
}

export function bundleContains(bundlePem: string, caPem: string): boolean {
  const wanted = fingerprint(caPem);
  return bundleCertificates(bundlePem).some((pem) => fingerprint(pem) === wanted);
}

/** Appends a CA unless it is already there (idempotent, so a resumed rotation can repeat it). */
export function addToBundle(bundlePem: string, caPem: string): string {
  const [ca, ...rest] = splitPemCertificates(caPem, 'CA certificate');
  if (ca === undefined || rest.length > 0)
    throw new Error('add to CA bundle: expected exactly one certificate');
  if (!parseCertificate(ca, 'CA certificate').ca)
    throw new Error('add to CA bundle: the certificate is not a CA');
  const certs = bundleCertificates(bundlePem);
  const wanted = fingerprint(ca);
  if (certs.some((pem) => fingerprint(pem) === wanted)) return certs.join('');
  return [...certs, ca].join('');
}

export function removeFromBundle(bundlePem: string, caPem: string): string {
  const unwanted = fingerprint(caPem);
  return bundleCertificates(bundlePem)
    .filter((pem) => fingerprint(pem) !== unwanted)
    .join('');
}

export function dropExpired(bundlePem: string, now: Date): { bundlePem: string; dropped: CertificateInfo[] } {
  const kept: string[] = [];
  const dropped: CertificateInfo[] = [];
  for (const pem of bundleCertificates(bundlePem)) {
    const info = describeCertificate(pem);
    if (info.notAfter.getTime() <= now.getTime()) dropped.push(info);
    else kept.push(pem);
  }
  return { bundlePem: kept.join(''), dropped };
}
