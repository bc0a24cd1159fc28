// Certificates for test control planes (node-forge for X.509, node:crypto for fast key generation).
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import forge from 'node-forge';

export interface KeyPairPem {
  certPem: string;
  keyPem: string;
}

export interface PlaneCertificates {
  ca: KeyPairPem;
  serving: KeyPairPem;
  admin: KeyPairPem;
  serviceAccount: { publicPem: string; privatePem: string };
}

function rsaKey(): { forgeKey: forge.pki.rsa.PrivateKey; forgePublic: forge.pki.rsa.PublicKey; pem: string } {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pem = privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
  const forgeKey = forge.pki.privateKeyFromPem(pem) as forge.pki.rsa.PrivateKey;
  return { forgeKey, forgePublic: forge.pki.setRsaPublicKey(forgeKey.n, forgeKey.e), pem };
}

function certificate(
  subject: forge.pki.CertificateField[],
  publicKey: forge.pki.PublicKey,
  issuer: { subject: forge.pki.CertificateField[]; key: forge.pki.rsa.PrivateKey },
  extensions: object[],
): string {
  const cert = forge.pki.createCertificate();
  cert.publicKey = publicKey;
  // Positive 16-byte serial: clear the top bit.
  const serial = randomBytes(16);
  serial[0] = (serial[0] as number) & 0x7f;
  cert.serialNumber = serial.toString('hex');
  cert.validity.notBefore = new Date(Date.now() - 60_000);
  cert.validity.notAfter = new Date(Date.now() + 7 * 24 * 3600_000);
  cert.setSubject(subject);
  cert.setIssuer(issuer.subject);
  cert.setExtensions(extensions);
  cert.sign(issuer.key, forge.md.sha256.create());
  return forge.pki.certificateToPem(cert);
}

/** A CA, a serving certificate for 127.0.0.1/localhost (and `extraIps`), an admin in system:masters, SA keys. */
export function planeCertificates(planeName: string, extraIps: string[] = []): PlaneCertificates {
  const caKey = rsaKey();
  const caSubject = [{ name: 'commonName', value: `skr-testenv-${planeName}-ca` }];
  const caCertPem = certificate(caSubject, caKey.forgePublic, { subject: caSubject, key: caKey.forgeKey }, [
    { name: 'basicConstraints', cA: true, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
  ]);
  const issuer = { subject: caSubject, key: caKey.forgeKey };

  const servingKey = rsaKey();
  const servingCertPem = certificate(
    [{ name: 'commonName', value: 'kube-apiserver' }],
    servingKey.forgePublic,
    issuer,
    [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 7, ip: '127.0.0.1' },
          ...extraIps.map((ip) => ({ type: 7, ip })),
          // What in-cluster clients dial: the `kubernetes` Service.
          { type: 7, ip: '10.0.0.1' },
          { type: 2, value: 'kubernetes.default.svc' },
          { type: 2, value: 'localhost' },
        ],
      },
    ],
  );

  const adminKey = rsaKey();
  const adminCertPem = certificate(
    [
      { name: 'commonName', value: 'admin' },
      { name: 'organizationName', value: 'system:masters' },
    ],
    adminKey.forgePublic,
    issuer,
    [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', clientAuth: true },
    ],
  );

  const sa = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return {
    ca: { certPem: caCertPem, keyPem: caKey.pem },
    serving: { certPem: servingCertPem, keyPem: servingKey.pem },
    admin: { certPem: adminCertPem, keyPem: adminKey.pem },
    serviceAccount: {
      publicPem: sa.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
      privatePem: sa.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    },
  };
}
