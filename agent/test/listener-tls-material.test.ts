// The listener's TLS material is checked before use, so a broken rotation fails with a reason; its CAs name the
// issuers in 401 reasons; a serving certificate without the listener's CN is told apart.
import { expect } from 'chai';
import { KCP_LISTENER_IDENTITY } from '@skr-watcher/api';
import { checkTlsMaterial, foreignListenerSubject, issuersOf } from '../src/listener/tls-material.js';
import {
  createTestCa,
  issueListenerServingCert,
  issueTestLeaf,
  type TestCa,
} from './support/listener-certs.js';

describe('listener TLS material', () => {
  let ca: TestCa;
  let second: TestCa;
  let serving: { certPem: string; keyPem: string };
  before(() => {
    ca = createTestCa('kcp-ca');
    second = createTestCa('kcp-ca-next');
    serving = issueListenerServingCert(ca);
  });

  it('passes certificate, key and each CA of a bundle on its own', () => {
    const checked = checkTlsMaterial({ ...serving, caBundlePem: `${ca.certPem}\n${second.certPem}` });
    expect(checked.cert).to.equal(serving.certPem);
    expect(checked.key).to.equal(serving.keyPem);
    expect(checked.ca).to.have.length(2);
    expect(issuersOf(checked.ca)).to.equal('CN=kcp-ca or CN=kcp-ca-next');
  });

  it('refuses what does not parse, a key of another certificate, an empty bundle and a bundle with a leaf', () => {
    const other = issueTestLeaf(ca, { commonName: 'other' });
    const bad = (material: Partial<typeof serving & { caBundlePem: string }>) => () =>
      checkTlsMaterial({ ...serving, caBundlePem: ca.certPem, ...material });
    expect(bad({ certPem: 'not a certificate' })).to.throw(
      'listener serving certificate is not a PEM X.509 certificate',
    );
    expect(bad({ keyPem: other.keyPem })).to.throw('listener serving key is unusable');
    expect(bad({ caBundlePem: 'nothing here' })).to.throw('listener CA bundle holds no PEM certificate');
    expect(bad({ caBundlePem: `${ca.certPem}\n${other.certPem}` })).to.throw(
      'listener CA bundle: certificate 2 (CN=other) is not a CA',
    );
  });

  it('tells a serving certificate without the listener’s CN, which SKR webhooks refuse', () => {
    expect(foreignListenerSubject(serving.certPem)).to.equal(undefined);
    const wrong = issueTestLeaf(ca, { commonName: 'kcp.example.com', usages: ['serverAuth'] });
    expect(foreignListenerSubject(wrong.certPem)).to.equal('CN=kcp.example.com');
    expect(KCP_LISTENER_IDENTITY).not.to.equal('kcp.example.com');
  });
});
