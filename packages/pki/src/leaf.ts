// Leaf certificates: per SKR (the webhook's serving and callback client certificate) and the KCP listener's.
import { isIP } from 'node:net';
import { X509Certificate } from 'node:crypto';
import forge from 'node-forge';
import { KCP_LISTENER_IDENTITY } from '@skr-watcher/api';
import { assertCommonName, assertValidityDays, type CertificateAndKey } from './ca.js';
import {
  assertRsaKeyBits,
  generateRsaKeyPair,
  generateRsaKeyPairAsync,
  readPrivateKey,
  type RsaKeyBits,
  type RsaKeyPair,
} from './keys.js';
import { randomSerialHex, signCertificate, wholeSeconds } from './signing.js';

const DAY_MS = 24 * 3600_000;

/** Leaves live 60 days and are renewed with 30 days left. */
export const DEFAULT_LEAF_VALIDITY_DAYS = 60;
/**
 * 2048 bits, not the reference system's 4096: a leaf lives 60 days, so 2048 (NIST-acceptable through 2030)
 * is ample, and the listener does one RSA operation per SKR handshake, about 7x cheaper at 2048 bits.
 */
export const DEFAULT_LEAF_KEY_BITS: RsaKeyBits = 2048;

interface LeafOptions {
  ca: CertificateAndKey;
  dnsNames: string[];
  ipAddresses?: string[];
  keyBits?: RsaKeyBits;
  validityDays?: number;
  now?: Date;
}

/**
 * Whose leaf: an SKR's (CN = runtime-id, which the listener maps to the Kyma; the same leaf serves the webhook to
 * the SKR API server and authenticates its callbacks), or the KCP listener's (CN = `KCP_LISTENER_IDENTITY`, which
 * SKR webhooks require of the KCP server and which no SKR leaf may carry). Both keep serverAuth and clientAuth:
 * the webhook serves and calls with one leaf, and agent replicas forward callbacks to each other with the
 * listener's (decision 004).
 */
export type IssueLeafOptions = LeafOptions &
  ({ role?: 'skr'; runtimeId: string } | { role: 'listener'; runtimeId?: undefined });

const DNS_NAME =
  /^(?=.{1,253}$)(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

export function isDnsName(name: string): boolean {
  return DNS_NAME.test(name);
}

export function issueLeaf(opts: IssueLeafOptions): CertificateAndKey {
  const plan = planLeaf(opts);
  return signLeaf(plan, generateRsaKeyPair(plan.keyBits));
}

/**
 * `issueLeaf` with the key generated off the event loop (RSA key generation is ~50-100 ms of CPU):
 * what a long-running server such as the agent should call.
 */
export async function issueLeafAsync(opts: IssueLeafOptions): Promise<CertificateAndKey> {
  const plan = planLeaf(opts);
  return signLeaf(plan, await generateRsaKeyPairAsync(plan.keyBits));
}

type LeafPlan = ReturnType<typeof planLeaf>;

/** Validates everything before a key is generated, so bad input fails fast and costs nothing. */
function planLeaf(opts: IssueLeafOptions) {
  const commonName = opts.role === 'listener' ? KCP_LISTENER_IDENTITY : opts.runtimeId;
  const what =
    opts.role === 'listener' ? 'issue the KCP listener certificate' : `issue leaf for runtime ${commonName}`;
  const keyBits = opts.keyBits ?? DEFAULT_LEAF_KEY_BITS;
  const validityDays = opts.validityDays ?? DEFAULT_LEAF_VALIDITY_DAYS;
  const ipAddresses = opts.ipAddresses ?? [];
  assertRsaKeyBits(keyBits, what);
  assertValidityDays(validityDays, what);
  assertCommonName(commonName, what);
  if (opts.role !== 'listener' && commonName === KCP_LISTENER_IDENTITY) {
    throw new RangeError(`${what}: runtime-id ${commonName} is reserved for the KCP listener`);
  }
  for (const name of opts.dnsNames) {
    if (!isDnsName(name)) throw new RangeError(`${what}: not a lower-case DNS name: ${JSON.stringify(name)}`);
  }
  for (const ip of ipAddresses) {
    if (isIP(ip) === 0) throw new RangeError(`${what}: not an IP address: ${JSON.stringify(ip)}`);
  }
  if (opts.dnsNames.length + ipAddresses.length === 0) {
    // Go (the API server calling the webhook) ignores the CN for host names: a leaf without SANs is unusable.
    throw new RangeError(`${what}: at least one DNS name or IP address is required`);
  }

  const ca = readCa(opts.ca, what);
  const notBefore = wholeSeconds(opts.now ?? new Date());
  if (notBefore < ca.cert.validity.notBefore || notBefore >= ca.cert.validity.notAfter) {
    throw new Error(
      `${what}: CA ${ca.commonName} is not valid at ${notBefore.toISOString()} ` +
        `(valid ${ca.cert.validity.notBefore.toISOString()} .. ${ca.cert.validity.notAfter.toISOString()})`,
    );
  }
  // A leaf never outlives its CA; the renewal policy then renews it early instead of it failing late.
  const notAfter = new Date(
    Math.min(notBefore.getTime() + validityDays * DAY_MS, ca.cert.validity.notAfter.getTime()),
  );

  return { opts, commonName, ipAddresses, keyBits, ca, notBefore, notAfter };
}

function signLeaf(plan: LeafPlan, key: RsaKeyPair): CertificateAndKey {
  const { opts, commonName, ipAddresses, ca, notBefore, notAfter } = plan;
  const cert = forge.pki.createCertificate();
  cert.publicKey = key.forgePublicKey;
  cert.serialNumber = randomSerialHex();
  cert.validity.notBefore = notBefore;
  cert.validity.notAfter = notAfter;
  cert.setSubject([{ name: 'commonName', value: commonName }]);
  cert.setIssuer(ca.cert.subject.attributes);
  cert.setExtensions([
    { name: 'basicConstraints', cA: false, critical: true },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
    { name: 'extKeyUsage', serverAuth: true, clientAuth: true },
    {
      name: 'subjectAltName',
      altNames: [
        ...opts.dnsNames.map((value) => ({ type: 2, value })),
        ...ipAddresses.map((ip) => ({ type: 7, ip })),
      ],
    },
    { name: 'subjectKeyIdentifier' },
    { name: 'authorityKeyIdentifier', keyIdentifier: ca.subjectKeyId },
  ]);
  return { certPem: signCertificate(cert, ca.privateKey), keyPem: key.keyPem };
}

function readCa(ca: CertificateAndKey, what: string) {
  let cert: forge.pki.Certificate;
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(ca.certPem);
    cert = forge.pki.certificateFromPem(ca.certPem);
  } catch (cause) {
    throw new Error(`${what}: the CA certificate is not a readable RSA PEM certificate`, { cause });
  }
  const commonName = String(cert.subject.getField('CN')?.value ?? x509.subject);
  if (!x509.ca) throw new Error(`${what}: certificate ${commonName} is not a CA (basicConstraints CA:false)`);
  const privateKey = readPrivateKey(ca.keyPem, `${what}: CA key`);
  if (!x509.checkPrivateKey(privateKey))
    throw new Error(`${what}: the CA key does not belong to CA ${commonName}`);
  const ski = cert.getExtension('subjectKeyIdentifier') as { subjectKeyIdentifier?: string } | undefined;
  const subjectKeyId = ski?.subjectKeyIdentifier
    ? forge.util.hexToBytes(ski.subjectKeyIdentifier)
    : cert.generateSubjectKeyIdentifier().getBytes();
  return { cert, commonName, privateKey, subjectKeyId };
}
