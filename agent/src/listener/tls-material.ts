// The listener's TLS material, checked before it is used: a broken rotation fails loudly with context, not in a
// handshake.
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { KCP_LISTENER_IDENTITY } from '@skr-watcher/api';
import type { TlsMaterial } from './contract.js';

/** The material as the TLS server takes it; `ca` holds each CA of the bundle on its own. */
export interface CheckedTls {
  cert: string;
  key: string;
  ca: string[];
}

/** Throws, saying what is wrong, unless the key fits the certificate and every block of the bundle is a CA. */
export function checkTlsMaterial(material: TlsMaterial): CheckedTls {
  let serving: X509Certificate;
  try {
    serving = new X509Certificate(material.certPem);
  } catch (cause) {
    throw new Error('listener serving certificate is not a PEM X.509 certificate', { cause });
  }
  try {
    if (!serving.checkPrivateKey(createPrivateKey(material.keyPem))) {
      throw new Error(`the key does not belong to the serving certificate (subject ${serving.subject})`);
    }
  } catch (cause) {
    throw new Error('listener serving key is unusable', { cause });
  }
  const blocks =
    material.caBundlePem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new Error('listener CA bundle holds no PEM certificate');
  blocks.forEach((block, index) => {
    let ca: X509Certificate;
    try {
      ca = new X509Certificate(block);
    } catch (cause) {
      throw new Error(`listener CA bundle: certificate ${index + 1} does not parse`, { cause });
    }
    if (!ca.ca) throw new Error(`listener CA bundle: certificate ${index + 1} (${ca.subject}) is not a CA`);
  });
  return { cert: material.certPem, key: material.keyPem, ca: blocks };
}

/** Subjects of the bundle's CAs, e.g. `CN=skr-watcher-ca`, for the 401 reasons. */
export function issuersOf(caBlocks: string[]): string {
  return caBlocks.map((block) => new X509Certificate(block).subject.replace(/\n/g, ', ')).join(' or ');
}

/**
 * The certificate's subject when its CN is not KCP_LISTENER_IDENTITY: every SKR webhook refuses such a listener
 * (not fatal, since an agent that does not start serves no one); undefined when it is.
 */
export function foreignListenerSubject(certPem: string): string | undefined {
  const subject = new X509Certificate(certPem).subject;
  return subject.split('\n').includes(`CN=${KCP_LISTENER_IDENTITY}`) ? undefined : subject;
}
