// Admission reviews that once took the webhook down or were refused, sent over a real TLS socket to an
// in-process webhook with a real mTLS KCP stand-in behind it.
import { expect } from 'chai';
import { ADMISSION_ALLOWED_MESSAGE } from '@skr-watcher/api';
import {
  callWebhook,
  sampleReview,
  startWebhookFixture,
  type WebhookFixture,
} from './support/webhook-fixture.js';

/** JSON text of `{"x": {"x": … "leaf"}}`, `depth` levels deep (JSON.stringify itself would overflow the stack). */
function nested(depth: number, leaf: string): string {
  return `${'{"x":'.repeat(depth)}"${leaf}"${'}'.repeat(depth)}`;
}

/** A Sample UPDATE review whose old and new spec are the given JSON texts. */
function deepUpdate(uid: string, name: string, spec: string, oldSpec: string): string {
  const text = JSON.stringify(sampleReview(uid, 'UPDATE', name, { new: 1 }, { old: 1 }));
  return text.replace('{"new":1}', spec).replace('{"old":1}', oldSpec);
}

describe('skr-webhook: hostile and unusual admission reviews on a real socket', () => {
  let fixture: WebhookFixture;
  before(async () => {
    fixture = await startWebhookFixture();
  });
  after(async () => {
    await fixture?.stop();
  });

  const post = (body: unknown) =>
    callWebhook(fixture.webhook.webhookPort, fixture.pki.ca.certPem, {
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });

  it('a Module CR nested 9,000 levels deep (one request) is answered, delivered, and the webhook lives on', async () => {
    const body = deepUpdate('deep-1', 'deep', nested(9_000, 'b'), nested(9_000, 'a'));
    expect(body.length).to.be.within(90_000, 120_000);
    const answer = await post(body);
    expect(answer.status).to.equal(200);
    expect(JSON.parse(answer.body)).to.deep.include({
      response: { uid: 'deep-1', allowed: true, result: { message: ADMISSION_ALLOWED_MESSAGE } },
    });
    await fixture.kcp.waitFor(
      (received) => received.some((r) => r.event.watched.Name === 'deep'),
      10_000,
      'the event of the deep object',
    );
    // The same object unchanged: compared to the last level, and nothing is sent.
    const same = await post(deepUpdate('deep-2', 'deep-same', nested(9_000, 'a'), nested(9_000, 'a')));
    expect(same.status).to.equal(200);
    const next = await post(sampleReview('after-deep', 'CREATE', 'after-deep'));
    expect(next.status).to.equal(200);
    await fixture.kcp.waitFor(
      (received) => received.some((r) => r.event.watched.Name === 'after-deep'),
      10_000,
      'the event after the deep object',
    );
    expect(fixture.kcp.received.some((r) => r.event.watched.Name === 'deep-same')).to.equal(false);
  });

  it('an admission.k8s.io/v1beta1 review is answered allowed in v1beta1, with its uid', async () => {
    const review = { ...sampleReview('beta-1', 'CREATE', 'beta'), apiVersion: 'admission.k8s.io/v1beta1' };
    const answer = await post(review);
    expect(answer.status).to.equal(200);
    expect(JSON.parse(answer.body)).to.deep.equal({
      apiVersion: 'admission.k8s.io/v1beta1',
      kind: 'AdmissionReview',
      response: { uid: 'beta-1', allowed: true, result: { message: ADMISSION_ALLOWED_MESSAGE } },
    });
    await fixture.kcp.waitFor(
      (received) => received.some((r) => r.event.watched.Name === 'beta'),
      10_000,
      'the event of the v1beta1 review',
    );
  });

  it('a change of a CRD version with a hyphen (v1-alpha) reaches KCP with that version and a fingerprint', async () => {
    const review = sampleReview('hy-1', 'UPDATE', 'hy', { greeting: 'b' }, { greeting: 'a' }) as {
      request: Record<string, Record<string, unknown>>;
    };
    review.request['kind'] = { ...review.request['kind'], version: 'v1-alpha' };
    review.request['resource'] = { ...review.request['resource'], version: 'v1-alpha' };
    const object = review.request['object'] as { metadata: Record<string, unknown> };
    object.metadata = { ...object.metadata, uid: 'uid-hy', generation: 2 };
    const old = review.request['oldObject'] as { metadata: Record<string, unknown> };
    old.metadata = { ...old.metadata, uid: 'uid-hy', generation: 1, resourceVersion: '17' };
    expect((await post(review)).status).to.equal(200);
    await fixture.kcp.waitFor(
      (received) => received.some((r) => r.event.watched.Name === 'hy'),
      10_000,
      'the event of the v1-alpha object',
    );
    const event = fixture.kcp.received.find((r) => r.event.watched.Name === 'hy')?.event;
    expect(event).to.deep.include({ uid: 'uid-hy', generation: 2, previousResourceVersion: '17' });
    expect(event?.watchedGvk.version).to.equal('v1-alpha');
    await fixture.webhook.queueDepth();
    expect(fixture.webhook.dispatchStats.dropped.invalid).to.equal(0);
  });
});
