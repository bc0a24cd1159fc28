// Reading certificates: PEM splitting and a plain description of what a certificate says.
import { X509Certificate } from 'node:crypto';

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]+?-----END CERTIFICATE-----/g;

const EKU_NAMES: Record<string, string> = {
  '1.3.6.1.5.5.7.3.1': 'serverAuth',
  '1.3.6.1.5.5.7.3.2': 'clientAuth',
  '1.3.6.1.5.5.7.3.3': 'codeSigning',
  '1.3.6.1.5.5.7.3.4': 'emailProtection',
  '1.3.6.1.5.5.7.3.8': 'timeStamping',
  '1.3.6.1.5.5.7.3.9': 'OCSPSigning',
};

export interface CertificateInfo {
  /** Subject CN; for a leaf, the runtime-id. Empty when the subject has no CN. */
  commonName: string;
  issuerCommonName: string;
  /** Lower-case hex without separators. */
  serialNumber: string;
  notBefore: Date;
  notAfter: Date;
  dnsNames: string[];
  ipAddresses: string[];
  isCa: boolean;
  /** Names for the well-known purposes (`serverAuth`, `clientAuth`), dotted OIDs otherwise. */
  extendedKeyUsages: string[];
  keyType: string;
  keyBits: number | undefined;
  /** SHA-256 fingerprint, upper-case hex pairs joined by colons as openssl prints it. */
  fingerprintSha256: string;
}

/** Every PEM `CERTIFICATE` block in `pem`, in order, each ending with a newline. Throws when there is none. */
export function splitPemCertificates(pem: string, what = 'PEM input'): string[] {
  const blocks = pem.match(PEM_CERTIFICATE);
  if (blocks === null || blocks.length === 0) throw new Error(`${what}: no PEM certificate found`);
  return blocks.map((block) => `${block.replace(/\r\n/g, '\n')}\n`);
}

export function parseCertificate(pem: string, what = 'certificate'): X509Certificate {
  try {
    return new X509Certificate(pem);
  } catch (cause) {
    throw new Error(`${what}: not a readable X.509 certificate`, { cause });
  }
}

/** Every certificate of a PEM file or bundle. */
export function parseCertificates(pem: string, what = 'PEM input'): X509Certificate[] {
  return splitPemCertificates(pem, what).map((block, index) =>
    parseCertificate(block, `${what} #${index + 1}`),
  );
}

export function describeCertificate(certificate: X509Certificate | string): CertificateInfo {
  const x509 = typeof certificate === 'string' ? parseCertificate(certificate) : certificate;
  const sans = parseSubjectAltName(x509.subjectAltName ?? '');
  const keyDetails = x509.publicKey.asymmetricKeyDetails;
  return {
    commonName: commonNameOf(x509.subject),
    issuerCommonName: commonNameOf(x509.issuer),
    serialNumber: x509.serialNumber.toLowerCase(),
    notBefore: new Date(x509.validFrom),
    notAfter: new Date(x509.validTo),
    dnsNames: sans.dnsNames,
    ipAddresses: sans.ipAddresses,
    isCa: x509.ca,
    extendedKeyUsages: (x509.keyUsage ?? []).map((oid) => EKU_NAMES[oid] ?? oid),
    keyType: x509.publicKey.asymmetricKeyType ?? 'unknown',
    keyBits: keyDetails?.modulusLength,
    fingerprintSha256: x509.fingerprint256,
  };
}

export function describeCertificates(pem: string, what?: string): CertificateInfo[] {
  return parseCertificates(pem, what).map((x509) => describeCertificate(x509));
}

/**
 * The CN of a distinguished name as Node prints it (`CN=x` per line). Not `toLegacyObject()`: on Node 22
 * calling it before anything loaded `node:tls` leaves `tls.createSecureContext` undefined for the process.
 */
function commonNameOf(distinguishedName: string): string {
  const line = distinguishedName.split('\n').find((entry) => entry.startsWith('CN='));
  return line === undefined ? '' : line.slice('CN='.length);
}

/** OpenSSL's SAN text (`DNS:a, IP Address:1.2.3.4`); Node quotes entries that contain separators. */
function parseSubjectAltName(text: string): { dnsNames: string[]; ipAddresses: string[] } {
  const dnsNames: string[] = [];
  const ipAddresses: string[] = [];
  const entry = /([A-Za-z ]+):("(?:[^"\\]|\\.)*"|[^,]*)(?:, |$)/g;
  for (const match of text.matchAll(entry)) {
    const [, type, raw] = match as unknown as [string, string, string];
    const value = raw.startsWith('"') ? (JSON.parse(raw) as string) : raw;
    if (type === 'DNS') dnsNames.push(value);
    if (type === 'IP Address') ipAddresses.push(canonicalIp(value));
  }
  return { dnsNames, ipAddresses };
}

/** OpenSSL prints IPv6 uncompressed (`0:0:0:0:0:0:0:1`); the URL parser gives the canonical `::1`. */
function canonicalIp(ip: string): string {
  if (!ip.includes(':')) return ip;
  try {
    return new URL(`http://[${ip}]/`).hostname.slice(1, -1);
  } catch {
    return ip;
  }
}
