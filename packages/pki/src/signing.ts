// Builds X.509 certificates with node-forge and signs them with node:crypto (native RSA, ~100x faster).
import { randomBytes, sign, type KeyObject } from 'node:crypto';
import forge from 'node-forge';

/** Not part of @types/node-forge, but a stable export of node-forge's x509 module. */
const x509 = forge.pki as unknown as { getTBSCertificate(cert: forge.pki.Certificate): forge.asn1.Asn1 };

/**
 * A random positive 128-bit serial (CA/B forum asks for ≥ 64 random bits). The first byte is kept in
 * 0x01..0x7f so the DER INTEGER is positive and minimally encoded: Go's x509 parser rejects anything else.
 */
export function randomSerialHex(): string {
  const serial = randomBytes(16);
  serial[0] = (serial[0] as number) & 0x7f || 0x01;
  return serial.toString('hex');
}

/** X.509 times have whole seconds; truncating keeps notBefore equal to the instant the policy compares. */
export function wholeSeconds(date: Date): Date {
  return new Date(Math.floor(date.getTime() / 1000) * 1000);
}

export function signCertificate(cert: forge.pki.Certificate, issuerKey: KeyObject): string {
  cert.signatureOid = forge.pki.oids.sha256WithRSAEncryption as string;
  cert.siginfo.algorithmOid = cert.signatureOid;
  cert.tbsCertificate = x509.getTBSCertificate(cert);
  const tbsDer = Buffer.from(forge.asn1.toDer(cert.tbsCertificate).getBytes(), 'binary');
  cert.signature = sign('sha256', tbsDer, issuerKey).toString('binary');
  // forge writes CRLF; LF is what kubectl, openssl and Secrets show.
  return forge.pki.certificateToPem(cert).replace(/\r\n/g, '\n');
}
