// The KCP certificate authority: a self-signed RSA CA that signs one leaf per SKR (decision 004).
import forge from 'node-forge';
import { assertRsaKeyBits, generateRsaKeyPair, type RsaKeyBits } from './keys.js';
import { randomSerialHex, signCertificate, wholeSeconds } from './signing.js';

const DAY_MS = 24 * 3600_000;

/** kubeadm's CA lifetime; the CA is long-lived and replaced by `skr-certs rotate-ca`, not by expiry. */
export const DEFAULT_CA_VALIDITY_DAYS = 3650;
export const DEFAULT_CA_KEY_BITS: RsaKeyBits = 4096;

export interface CertificateAndKey {
  certPem: string;
  keyPem: string;
}

export interface CreateCaOptions {
  commonName: string;
  keyBits?: RsaKeyBits;
  validityDays?: number;
  now?: Date;
}

export function assertValidityDays(days: number, what: string): void {
  if (!Number.isFinite(days) || days <= 0 || days > 36500) {
    throw new RangeError(`${what}: validityDays must be a number of days in (0, 36500], got ${String(days)}`);
  }
}

/** X.520 caps commonName at 64 characters; control characters would make names ambiguous in logs and tools. */
export function assertCommonName(commonName: string, what: string): void {
  // eslint-disable-next-line no-control-regex
  if (commonName.length === 0 || commonName.length > 64 || /[\u0000-\u001f\u007f]/.test(commonName)) {
    throw new RangeError(`${what}: commonName must be 1..64 characters without control characters`);
  }
}

export function createCa(opts: CreateCaOptions): CertificateAndKey {
  const keyBits = opts.keyBits ?? DEFAULT_CA_KEY_BITS;
  const validityDays = opts.validityDays ?? DEFAULT_CA_VALIDITY_DAYS;
  assertRsaKeyBits(keyBits, `create CA ${opts.commonName}`);
  assertValidityDays(validityDays, `create CA ${opts.commonName}`);
  assertCommonName(opts.commonName, 'create CA');
  const notBefore = wholeSeconds(opts.now ?? new Date());

  const key = generateRsaKeyPair(keyBits);
  const cert = forge.pki.createCertificate();
  cert.publicKey = key.forgePublicKey;
  cert.serialNumber = randomSerialHex();
  cert.validity.notBefore = notBefore;
  cert.validity.notAfter = new Date(notBefore.getTime() + validityDays * DAY_MS);
  const subject = [{ name: 'commonName', value: opts.commonName }];
  cert.setSubject(subject);
  cert.setIssuer(subject);
  cert.setExtensions([
    // pathLen 0: this CA signs leaves only, never another CA.
    { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  return { certPem: signCertificate(cert, key.privateKey), keyPem: key.keyPem };
}
