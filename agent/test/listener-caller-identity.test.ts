// Who calls the listener: the runtime-id of a verified client certificate (direct mode) or of a trusted gateway's
// X-Forwarded-Client-Cert, and why anything else is not authenticated, in words an SKR operator can act on.
import { X509Certificate } from 'node:crypto';
import type { PeerCertificate } from 'node:tls';
import { expect } from 'chai';
import { KCP_LISTENER_IDENTITY } from '@skr-watcher/api';
import { certificateIdentity, gatewayIdentity, untrustedReason } from '../src/listener/caller-identity.js';
import { trustedProxies } from '../src/listener/trusted-proxies.js';
import { createTestCa, issueTestLeaf } from './support/listener-certs.js';

const ISSUERS = 'CN=kcp-ca';
const peer = (subject: Record<string, unknown>, more: Partial<PeerCertificate> = {}) =>
  ({
    subject,
    issuer: { CN: 'foreign-ca', O: 'Elsewhere' },
    valid_from: 'Jan 1',
    valid_to: 'Feb 1',
    ...more,
  }) as unknown as PeerCertificate;

describe('caller identity', () => {
  it('takes the subject CN of a verified certificate as the runtime-id', () => {
    expect(
      certificateIdentity(
        { certificate: peer({ CN: 'runtime-a' }), authorized: true, authorizationError: null },
        ISSUERS,
      ),
    ).to.deep.equal({ ok: true, runtimeId: 'runtime-a' });
  });

  it('refuses no certificate, the listener’s own, none or several CNs, each with its reason', () => {
    const refusal = (certificate: PeerCertificate | Record<string, never>) => {
      const identity = certificateIdentity(
        { certificate, authorized: true, authorizationError: null },
        ISSUERS,
      );
      return identity.ok ? 'accepted' : identity.message;
    };
    expect(refusal({})).to.equal(
      'no client certificate: the listener accepts certificates issued by CN=kcp-ca, and the client sent none (a client holding none from these CAs sends none)',
    );
    expect(refusal(peer({ CN: KCP_LISTENER_IDENTITY }))).to.contain("carries the KCP listener's identity");
    expect(refusal(peer({ CN: ['a', 'b'] }))).to.equal('client certificate has several subject CNs');
    expect(refusal(peer({ O: 'SKR' }))).to.equal('client certificate has no subject CN (the runtime-id)');
    expect(refusal(peer({ CN: '' }))).to.equal('client certificate has no subject CN (the runtime-id)');
  });

  it('says why OpenSSL did not trust a certificate, by its error code', () => {
    const untrusted = (authorizationError: unknown) => {
      const identity = certificateIdentity(
        { certificate: peer({ CN: 'runtime-a' }), authorized: false, authorizationError },
        ISSUERS,
      );
      return identity.ok ? 'accepted' : identity.message;
    };
    expect(untrusted('CERT_HAS_EXPIRED')).to.match(/^client certificate expired at Feb 1;/);
    expect(untrusted({ code: 'CERT_NOT_YET_VALID' })).to.match(/not valid before Jan 1/);
    expect(untrusted(new Error('odd'))).to.equal(
      'client certificate is not trusted by the KCP CA bundle: Error: odd',
    );
    expect(untrustedReason('UNABLE_TO_VERIFY_LEAF_SIGNATURE', peer({}), ISSUERS)).to.equal(
      'client certificate is not trusted: it was issued by CN=foreign-ca, O=Elsewhere, and the listener accepts certificates issued by CN=kcp-ca',
    );
    expect(untrustedReason('INVALID_PURPOSE', peer({}), ISSUERS)).to.contain('no clientAuth');
  });

  it('believes a gateway’s XFCC only from a trusted proxy, and never the listener’s identity', () => {
    const proxies = trustedProxies(['10.0.0.0/8']);
    const subject = (cn: string) => `Hash=0f3c;Subject="CN=${cn},O=SKR"`;
    expect(gatewayIdentity('10.1.2.3', subject('runtime-a'), proxies)).to.deep.equal({
      ok: true,
      runtimeId: 'runtime-a',
    });
    expect(
      gatewayIdentity('10.1.2.3', ['By=x;Subject="CN=spoofed"', subject('runtime-a')], proxies),
      'the last element',
    ).to.deep.equal({ ok: true, runtimeId: 'runtime-a' });
    expect(gatewayIdentity('192.168.0.1', subject('runtime-a'), proxies)).to.deep.equal({
      ok: false,
      message: 'peer 192.168.0.1 is not a trusted proxy',
    });
    expect(gatewayIdentity(undefined, subject('runtime-a'), proxies)).to.include({ ok: false });
    expect(gatewayIdentity('10.1.2.3', ' ', proxies)).to.deep.equal({
      ok: false,
      message: 'X-Forwarded-Client-Cert header is missing',
    });
    expect(gatewayIdentity('10.1.2.3', 'Subject="CN=a', proxies)).to.include({ ok: false });
    expect(gatewayIdentity('10.1.2.3', subject(KCP_LISTENER_IDENTITY), proxies)).to.include({ ok: false });
  });

  it('reads a forwarded certificate’s CN as the gateway sends it', () => {
    const leaf = issueTestLeaf(createTestCa('kcp-ca'), { commonName: 'runtime-b' });
    expect(new X509Certificate(leaf.certPem).subject).to.equal('CN=runtime-b');
    const identity = gatewayIdentity(
      '10.0.0.1',
      `Cert="${encodeURIComponent(leaf.certPem)}"`,
      trustedProxies(['10.0.0.1']),
    );
    expect(identity).to.deep.equal({ ok: true, runtimeId: 'runtime-b' });
  });
});
