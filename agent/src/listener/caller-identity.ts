// Who is calling: the runtime-id of the SKR behind a callback, from its verified client certificate (direct mode) or
// from the X-Forwarded-Client-Cert header of a trusted gateway, or why it is not authenticated, in words an SKR
// operator can act on (the 401 body is all it sees).
import type { PeerCertificate } from 'node:tls';
import { KCP_LISTENER_IDENTITY } from '@skr-watcher/api';
import type { TrustedProxies } from './trusted-proxies.js';
import { runtimeIdFromXfcc } from './xfcc.js';

export type Identity = { ok: true; runtimeId: string } | { ok: false; message: string };

/** The listener's own certificate (replicas forward with it) is never an SKR's identity (decision 004). */
const listenerIdentityRefused: Identity = {
  ok: false,
  message: `client certificate carries the KCP listener's identity (CN ${KCP_LISTENER_IDENTITY}), not an SKR runtime-id`,
};

function distinguishedName(name: Record<string, unknown> | undefined): string {
  const parts = Object.entries(name ?? {}).map(([key, value]) => `${key}=${String(value)}`);
  return parts.length > 0 ? parts.join(', ') : '(empty)';
}

/**
 * Why OpenSSL refused a client certificate. Naming our CAs (`issuers`) discloses nothing new: the TLS
 * CertificateRequest already lists them to every client.
 */
export function untrustedReason(code: string, peer: PeerCertificate, issuers: string): string {
  switch (code) {
    case 'CERT_HAS_EXPIRED':
      return `client certificate expired at ${peer.valid_to}; the KCP agent renews SKR certificates 30 days before expiry, so the SKR has not loaded its renewed one`;
    case 'CERT_NOT_YET_VALID':
      return `client certificate is not valid before ${peer.valid_from} (are the clocks of SKR and KCP apart?)`;
    case 'INVALID_PURPOSE':
      return 'client certificate is not for client use (no clientAuth extended key usage)';
    case 'UNABLE_TO_VERIFY_LEAF_SIGNATURE':
    case 'UNABLE_TO_GET_ISSUER_CERT':
    case 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY':
    case 'DEPTH_ZERO_SELF_SIGNED_CERT':
    case 'SELF_SIGNED_CERT_IN_CHAIN':
    case 'CERT_SIGNATURE_FAILURE':
      return `client certificate is not trusted: it was issued by ${distinguishedName(peer.issuer as unknown as Record<string, unknown>)}, and the listener accepts certificates issued by ${issuers}`;
    default:
      return `client certificate is not trusted by the KCP CA bundle: ${code}`;
  }
}

/** What a TLS socket says of its client certificate. */
export interface TlsPeer {
  /** `getPeerCertificate()`: empty when the client sent none. */
  certificate: PeerCertificate | Record<string, never> | undefined;
  authorized: boolean;
  authorizationError: unknown;
}

/** Direct mode: the subject CN of a client certificate that OpenSSL verified against `issuers`' bundle. */
export function certificateIdentity(peer: TlsPeer, issuers: string): Identity {
  const certificate = peer.certificate;
  if (!certificate || Object.keys(certificate).length === 0) {
    // Go clients (and Node's) send no certificate when none they hold is from the CAs the server names.
    return {
      ok: false,
      message: `no client certificate: the listener accepts certificates issued by ${issuers}, and the client sent none (a client holding none from these CAs sends none)`,
    };
  }
  if (!peer.authorized) {
    const cause = peer.authorizationError;
    const code =
      typeof cause === 'string'
        ? cause
        : ((cause as NodeJS.ErrnoException | undefined)?.code ?? String(cause));
    return { ok: false, message: untrustedReason(code, certificate as PeerCertificate, issuers) };
  }
  const cn = (certificate as PeerCertificate).subject?.CN as unknown;
  if (cn === KCP_LISTENER_IDENTITY) return listenerIdentityRefused;
  if (typeof cn === 'string' && cn !== '') return { ok: true, runtimeId: cn };
  if (Array.isArray(cn)) return { ok: false, message: 'client certificate has several subject CNs' };
  return { ok: false, message: 'client certificate has no subject CN (the runtime-id)' };
}

/** Gateway mode: the runtime-id the last XFCC element vouches for, from a socket peer among `proxies` only. */
export function gatewayIdentity(
  peerAddress: string | undefined,
  xfcc: string | string[] | undefined,
  proxies: TrustedProxies | undefined,
): Identity {
  if (!proxies?.trusts(peerAddress)) {
    return { ok: false, message: `peer ${peerAddress ?? '(gone)'} is not a trusted proxy` };
  }
  const header = Array.isArray(xfcc) ? xfcc.join(',') : xfcc;
  if (header === undefined || header.trim() === '') {
    return { ok: false, message: 'X-Forwarded-Client-Cert header is missing' };
  }
  const runtimeId = runtimeIdFromXfcc(header);
  if (!runtimeId.ok) return { ok: false, message: `X-Forwarded-Client-Cert: ${runtimeId.error}` };
  if (runtimeId.value === KCP_LISTENER_IDENTITY) return listenerIdentityRefused;
  return { ok: true, runtimeId: runtimeId.value };
}
