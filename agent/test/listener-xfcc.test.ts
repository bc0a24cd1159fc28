// Parsing of X-Forwarded-Client-Cert and of the distinguished names inside it.
import { expect } from 'chai';
import fc from 'fast-check';
import { commonNamesOf, parseXfcc, runtimeIdFromXfcc, trustedProxies } from '../src/listener/index.js';
import { createTestCa, issueTestLeaf } from './support/listener-certs.js';

/** Go's url.QueryEscape: form encoding, a space as `+`, a `+` as %2B (upstream's listener tooling sends this). */
const queryEscape = (text: string) =>
  encodeURIComponent(text)
    .replace(/%20/g, '+')
    .replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

describe('X-Forwarded-Client-Cert parsing', function () {
  it('splits elements and pairs, honouring quotes and escaped quotes', function () {
    const parsed = parseXfcc(
      'By=spiffe://a;Hash=1;Subject="CN=x, y;z=\\"q\\"";URI=spiffe://b, By=spiffe://c;DNS=a.example;DNS=b.example',
    );
    expect(parsed.ok).to.equal(true);
    if (!parsed.ok) return;
    expect(parsed.value).to.have.length(2);
    expect(parsed.value[0]?.get('subject')).to.deep.equal(['CN=x, y;z="q"']);
    expect(parsed.value[0]?.get('uri')).to.deep.equal(['spiffe://b']);
    expect(parsed.value[1]?.get('dns')).to.deep.equal(['a.example', 'b.example']);
  });

  it('refuses malformed headers', function () {
    for (const header of ['', 'Subject', 'Subject="abc', 'Subject="a"b', 'By=x;', '=x', 'By=x,']) {
      expect(parseXfcc(header).ok, header).to.equal(false);
    }
  });

  it('reads CNs from RFC 2253 and legacy one-line subjects, with escapes', function () {
    expect(commonNamesOf('CN=runtime-a,O=SKR,C=DE')).to.deep.equal({ ok: true, value: ['runtime-a'] });
    expect(commonNamesOf('O=Acme\\, Inc.,CN=a\\,b ')).to.deep.equal({ ok: true, value: ['a,b'] });
    expect(commonNamesOf('cn=caf\\C3\\A9')).to.deep.equal({ ok: true, value: ['café'] });
    expect(commonNamesOf('2.5.4.3=oid-form')).to.deep.equal({ ok: true, value: ['oid-form'] });
    expect(commonNamesOf('/C=US/O=Lyft/CN=Test Client')).to.deep.equal({ ok: true, value: ['Test Client'] });
    expect(commonNamesOf('CN=#0403616263').ok).to.equal(false);
    expect(commonNamesOf('CN=\\FF').ok).to.equal(false);
  });

  it('takes the runtime-id from the last element only', function () {
    expect(runtimeIdFromXfcc('Subject="CN=forged",Subject="CN=real"')).to.deep.equal({
      ok: true,
      value: 'real',
    });
    expect(runtimeIdFromXfcc('Subject="CN=real",URI=spiffe://x').ok).to.equal(false);
  });

  it("reads a Cert encoded with Go's url.QueryEscape (`+` for spaces), as upstream accepts it", function () {
    const ca = createTestCa('xfcc-ca');
    // Many certificates until one has a `+` in its base64: it must stay a `+` (sent as %2B), not become a space.
    let pem = '';
    for (let i = 0; i < 20 && !pem.includes('+'); i++)
      pem = issueTestLeaf(ca, { commonName: 'runtime-go' }).certPem;
    expect(pem).to.contain('+');
    const header = `Hash=abc;Cert="${queryEscape(pem)}";Subject="CN=runtime-go"`;
    expect(header).to.contain('BEGIN+CERTIFICATE');
    expect(runtimeIdFromXfcc(header)).to.deep.equal({ ok: true, value: 'runtime-go' });
    // Envoy's percent-encoding still reads as before.
    expect(runtimeIdFromXfcc(`Cert="${encodeURIComponent(pem)}"`)).to.deep.equal({
      ok: true,
      value: 'runtime-go',
    });
  });

  it('never throws on arbitrary headers', function () {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 300 }), (header) => {
        const parsed = runtimeIdFromXfcc(header);
        expect(parsed.ok === true || typeof parsed.error === 'string').to.equal(true);
      }),
      { numRuns: 3_000 },
    );
    fc.assert(
      fc.property(fc.stringMatching(/^[A-Za-z=,;"\\ +#0-9]{0,60}$/), (dn) => {
        expect(() => commonNamesOf(dn)).not.to.throw();
        expect(() => parseXfcc(dn)).not.to.throw();
      }),
      { numRuns: 3_000 },
    );
  });
});

describe('trusted proxies', function () {
  it('matches addresses and CIDRs of both families, including IPv4-mapped IPv6 peers', function () {
    const proxies = trustedProxies(['10.1.2.3', '192.168.0.0/16', 'fd00::/8']);
    expect(proxies.trusts('10.1.2.3')).to.equal(true);
    expect(proxies.trusts('::ffff:10.1.2.3')).to.equal(true);
    expect(proxies.trusts('192.168.200.1')).to.equal(true);
    expect(proxies.trusts('fd12::1')).to.equal(true);
    expect(proxies.trusts('10.1.2.4')).to.equal(false);
    expect(proxies.trusts('fe80::1')).to.equal(false);
    expect(proxies.trusts(undefined)).to.equal(false);
    expect(proxies.trusts('garbage')).to.equal(false);
  });
});
