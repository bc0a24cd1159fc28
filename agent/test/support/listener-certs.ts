// Test-only certificates for the listener: CAs and SKR leaves (CN = runtime-id), signed fast.
// node-forge builds the X.509 structures; node:crypto generates keys and signs, which is ~100x faster
// than forge's pure-JS RSA and lets the benchmark sign 1,000 identities in seconds.
import { generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import forge from 'node-forge';
import { KCP_LISTENER_IDENTITY } from '@skr-watcher/api';

export interface KeyPairPem {
  certPem: string;
  keyPem: string;
}

/** An RSA key in the two shapes we need: forge's public key for the certificate, PEM for TLS. */
export interface TestKey {
  keyPem: string;
  privateKey: KeyObject;
  forgePublic: forge.pki.PublicKey;
}

export interface TestCa extends KeyPairPem {
  commonName: string;
  key: TestKey;
  subject: forge.pki.CertificateField[];
}

export function createTestKey(): TestKey {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return {
    keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    privateKey,
    forgePublic: forge.pki.publicKeyFromPem(publicKey.export({ type: 'spki', format: 'pem' }).toString()),
  };
}

interface CertificateSpec {
  subject: forge.pki.CertificateField[];
  publicKey: forge.pki.PublicKey;
  issuer: { subject: forge.pki.CertificateField[]; privateKey: KeyObject };
  extensions: object[];
  notBefore?: Date;
  notAfter?: Date;
}

function signCertificate(spec: CertificateSpec): string {
  const cert = forge.pki.createCertificate();
  cert.publicKey = spec.publicKey;
  const serial = randomBytes(16);
  serial[0] = (serial[0] as number) & 0x7f;
  cert.serialNumber = serial.toString('hex');
  cert.validity.notBefore = spec.notBefore ?? new Date(Date.now() - 60_000);
  cert.validity.notAfter = spec.notAfter ?? new Date(Date.now() + 24 * 3600_000);
  cert.setSubject(spec.subject);
  cert.setIssuer(spec.issuer.subject);
  cert.setExtensions(spec.extensions);
  // forge calls `key.sign(md)` after it has set `cert.tbsCertificate`; sign those DER bytes natively.
  const nativeSigner = {
    sign: (): string => {
      const tbs = Buffer.from(forge.asn1.toDer(cert.tbsCertificate).getBytes(), 'binary');
      return sign('sha256', tbs, spec.issuer.privateKey).toString('binary');
    },
  };
  cert.sign(nativeSigner as unknown as forge.pki.rsa.PrivateKey, forge.md.sha256.create());
  return forge.pki.certificateToPem(cert);
}

export function createTestCa(commonName: string, options: { notAfter?: Date } = {}): TestCa {
  const key = createTestKey();
  const subject = [{ name: 'commonName', value: commonName }];
  const certPem = signCertificate({
    subject,
    publicKey: key.forgePublic,
    issuer: { subject, privateKey: key.privateKey },
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
    ...(options.notAfter ? { notAfter: options.notAfter } : {}),
  });
  return { commonName, certPem, keyPem: key.keyPem, key, subject };
}

export interface LeafSpec {
  /** Subject CN; omitted entirely when `null` (a certificate without a CN). */
  commonName: string | null;
  dnsNames?: string[];
  ipAddresses?: string[];
  /** Extended key usages; both by default, as packages/pki's SKR leaves. */
  usages?: ('serverAuth' | 'clientAuth')[];
  /** Reuse a key (benchmarks issue many leaves; keys are the slow part). */
  key?: TestKey;
  notBefore?: Date;
  notAfter?: Date;
}

export function issueTestLeaf(ca: TestCa, spec: LeafSpec): KeyPairPem {
  const key = spec.key ?? createTestKey();
  const usages = spec.usages ?? ['serverAuth', 'clientAuth'];
  const altNames = [
    ...(spec.dnsNames ?? []).map((value) => ({ type: 2, value })),
    ...(spec.ipAddresses ?? []).map((ip) => ({ type: 7, ip })),
  ];
  const certPem = signCertificate({
    subject: spec.commonName === null ? [] : [{ name: 'commonName', value: spec.commonName }],
    publicKey: key.forgePublic,
    issuer: { subject: ca.subject, privateKey: ca.key.privateKey },
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      {
        name: 'extKeyUsage',
        serverAuth: usages.includes('serverAuth'),
        clientAuth: usages.includes('clientAuth'),
      },
      ...(altNames.length > 0 ? [{ name: 'subjectAltName', altNames }] : []),
    ],
    ...(spec.notBefore ? { notBefore: spec.notBefore } : {}),
    ...(spec.notAfter ? { notAfter: spec.notAfter } : {}),
  });
  return { certPem, keyPem: key.keyPem };
}

/** The serving certificate of a listener on loopback. */
export function issueListenerServingCert(ca: TestCa): KeyPairPem {
  return issueTestLeaf(ca, {
    commonName: KCP_LISTENER_IDENTITY,
    dnsNames: ['localhost'],
    ipAddresses: ['127.0.0.1'],
    usages: ['serverAuth'],
  });
}
