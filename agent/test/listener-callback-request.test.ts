// One callback request checked step by step: what is refused before the body is read (path, method, media type,
// declared size), the runtime-id, the body as UTF-8 JSON of its contract, a v1 owner naming another Kyma; and the
// accepted event built from it.
import { expect } from 'chai';
import { LABELS, LIMITS, LISTENER_STATUS } from '@skr-watcher/api';
import {
  DISCARD_CAP_BYTES,
  acceptedEventOf,
  checkRequestHead,
  decodeEvent,
  foreignOwnerOf,
  kymaKeyOf,
  noKymaAnswer,
  runtimeIdRefusal,
} from '../src/listener/callback-request.js';
import { v1Body, v2Body } from './support/listener-client.js';

const post = (url: string, headers: Record<string, string> = {}) => ({
  url,
  method: 'POST',
  headers: { 'content-type': 'application/json', ...headers },
});
const refusal = (checked: { ok: boolean; answer?: unknown }) => (checked.ok ? undefined : checked.answer);
const KYMA = { namespace: 'kcp-system', name: 'kyma-a' };

describe('callback request', () => {
  it('finds contract and component in the path, the query left out', () => {
    expect(checkRequestHead(post('/v2/lifecycle-manager/event?x=1'))).to.deep.equal({
      ok: true,
      value: { version: 'v2', component: 'lifecycle-manager' },
    });
    expect(checkRequestHead(post('/v1/kyma/event'))).to.deep.include({ ok: true });
  });

  it('refuses before reading: unknown path 404, not POST 405 with Allow, not JSON or encoded 415, too big 413', () => {
    expect(refusal(checkRequestHead(post('/v3/x/event')))).to.include({ code: LISTENER_STATUS.notFound });
    expect(refusal(checkRequestHead({ ...post('/v2/x/event'), method: 'GET' }))).to.deep.equal({
      code: LISTENER_STATUS.methodNotAllowed,
      message: 'method GET is not allowed; use POST',
      headers: { allow: 'POST' },
    });
    expect(refusal(checkRequestHead(post('/v2/x/event', { 'content-type': 'text/plain' })))).to.deep.equal({
      code: LISTENER_STATUS.unsupportedMediaType,
      message: 'content-type must be application/json, got "text/plain"',
    });
    expect(refusal(checkRequestHead(post('/v2/x/event', { 'content-encoding': 'gzip' })))).to.include({
      code: LISTENER_STATUS.unsupportedMediaType,
    });
    const big = refusal(
      checkRequestHead(post('/v2/x/event', { 'content-length': String(LIMITS.eventBodyBytes + 1) })),
    );
    expect(big).to.include({ code: LISTENER_STATUS.payloadTooLarge, close: false });
    const huge = refusal(
      checkRequestHead(post('/v2/x/event', { 'content-length': String(DISCARD_CAP_BYTES + 1) })),
    );
    expect(huge, 'not worth reading to keep the connection').to.include({ close: true });
  });

  it('refuses a runtime-id that is no label value, and names the label a Kyma would need', () => {
    expect(runtimeIdRefusal('runtime-a')).to.equal(undefined);
    expect(runtimeIdRefusal('a'.repeat(63))).to.equal(undefined);
    expect(runtimeIdRefusal('a'.repeat(64))).to.include({ code: LISTENER_STATUS.forbidden });
    expect(runtimeIdRefusal('runtime a')?.message).to.equal(
      'runtime-id "runtime a" is not a valid label value, so no Kyma can carry it',
    );
    expect(noKymaAnswer('runtime-z')).to.deep.equal({
      code: LISTENER_STATUS.forbidden,
      message: `no Kyma is labelled ${LABELS.runtimeId}=runtime-z`,
    });
  });

  it('decodes the body as UTF-8 JSON of the path’s contract, else 400 with the reason', () => {
    const v2 = { version: 'v2' as const, component: 'c' };
    expect(decodeEvent(v2, Buffer.from(v2Body()))).to.deep.include({ ok: true });
    expect(refusal(decodeEvent(v2, Buffer.from([0x7b, 0xff, 0x7d])))).to.include({
      code: LISTENER_STATUS.badRequest,
    });
    expect((refusal(decodeEvent(v2, Buffer.from('{"watched":{}}'))) as { message: string }).message).to.match(
      /^invalid v2 event: watched\.Namespace/,
    );
  });

  it('tells a v1 owner naming another Kyma, and builds the accepted event with its fingerprint', () => {
    const v1 = { version: 'v1' as const, component: 'kyma' };
    const own = decodeEvent(v1, Buffer.from(v1Body(KYMA)));
    const other = decodeEvent(v1, Buffer.from(v1Body({ namespace: 'kcp-system', name: 'kyma-b' })));
    if (!own.ok || !other.ok) throw new Error('v1 bodies did not decode');
    expect(foreignOwnerOf(v1, own.value, KYMA)).to.equal(undefined);
    expect(foreignOwnerOf(v1, other.value, KYMA)).to.equal('kcp-system/kyma-b');

    const v2 = { version: 'v2' as const, component: 'lifecycle-manager' };
    const body = JSON.stringify({ ...JSON.parse(v2Body('sample-9', 'team-a')), uid: 'u-1', generation: 4 });
    const event = decodeEvent(v2, Buffer.from(body));
    if (!event.ok) throw new Error('v2 body did not decode');
    expect(foreignOwnerOf(v2, event.value, KYMA), 'v2 names no owner').to.equal(undefined);
    const receivedAt = new Date(0);
    expect(acceptedEventOf('runtime-a', KYMA, v2, event.value, receivedAt)).to.deep.equal({
      runtimeId: 'runtime-a',
      kyma: KYMA,
      component: 'lifecycle-manager',
      contract: 'v2',
      watched: { namespace: 'team-a', name: 'sample-9' },
      gvk: { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: 'Sample' },
      fingerprint: { uid: 'u-1', generation: 4 },
      receivedAt,
    });
    expect(kymaKeyOf(KYMA)).to.equal('kcp-system/kyma-a');
  });
});
