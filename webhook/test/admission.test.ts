// The webhook's relevance rules, driven by the worked examples in fixtures/ plus cases of our own.
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import fc from 'fast-check';
import {
  parseAdmissionReview,
  parseWatchEvent,
  type AdmissionReview,
  type WatchEventV2,
} from '@skr-watcher/api';
import { isRelevantChange, sameJson } from '../src/admission.js';

interface Vector {
  name: string;
  review: unknown;
  event: unknown;
}

const vectors = JSON.parse(
  readFileSync(new URL('./fixtures/admission-relevance.json', import.meta.url), 'utf8'),
) as Vector[];

function review(body: unknown): AdmissionReview {
  const parsed = parseAdmissionReview(body);
  if (!parsed.ok) throw new Error(`fixture is not a valid AdmissionReview: ${parsed.error}`);
  return parsed.value;
}

/** A Sample UPDATE review from old and new objects, for cases the fixture's vectors do not cover. */
function sampleUpdate(
  oldObject: Record<string, unknown>,
  object: Record<string, unknown>,
  subResource?: string,
) {
  return review({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: 'own-1',
      kind: { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: 'Sample' },
      resource: { group: 'operator.kyma-project.io', version: 'v1alpha1', resource: 'samples' },
      ...(subResource ? { subResource } : {}),
      name: 's',
      namespace: 'ns',
      operation: 'UPDATE',
      object: { apiVersion: 'operator.kyma-project.io/v1alpha1', kind: 'Sample', ...object },
      oldObject: { apiVersion: 'operator.kyma-project.io/v1alpha1', kind: 'Sample', ...oldObject },
    },
  });
}

/** The fields of a v2 event that upstream's webhook sends too. */
function wireFields(event: WatchEventV2 | undefined) {
  return event && { watched: event.watched, watchedGvk: event.watchedGvk };
}

const SAMPLE_EVENT = {
  watched: { Namespace: 'ns', Name: 's' },
  watchedGvk: { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: 'Sample' },
};

describe('isRelevantChange', () => {
  it('the fixture holds the worked examples vec-1 to vec-15', () => {
    const uids = vectors.map((vector) => (vector.review as { request: { uid: string } }).request.uid);
    for (let n = 1; n <= 15; n++) expect(uids).to.include(`vec-${n}`);
  });

  for (const vector of vectors) {
    it(`vector: ${vector.name}`, () => {
      const event = isRelevantChange(review(vector.review));
      if (vector.event === null) expect(event).to.equal(undefined);
      // The vectors hold the wire fields shared with upstream; the fingerprint fields are checked below.
      else expect(wireFields(event)).to.deep.equal(vector.event);
    });
  }

  it('events carry the fingerprint of the change: uid, generation after it, resourceVersion before it', () => {
    const event = isRelevantChange(
      sampleUpdate(
        { metadata: { name: 's', uid: 'u-1', generation: 3, resourceVersion: '41' }, spec: { a: 1 } },
        { metadata: { name: 's', uid: 'u-1', generation: 4, resourceVersion: '41' }, spec: { a: 2 } },
      ),
    );
    expect(event).to.deep.equal({
      ...SAMPLE_EVENT,
      uid: 'u-1',
      generation: 4,
      previousResourceVersion: '41',
    });
    expect(parseWatchEvent('v2', event).ok).to.equal(true);
  });

  it('a fingerprint field of an unexpected type is left out, the event still goes', () => {
    const event = isRelevantChange(
      sampleUpdate(
        { metadata: { name: 's', uid: 7, generation: 'x', resourceVersion: 'r'.repeat(65) }, spec: { a: 1 } },
        { metadata: { name: 's', uid: 7, generation: -1 }, spec: { a: 2 } },
      ),
    );
    expect(event).to.deep.equal(SAMPLE_EVENT);
  });

  it('a spec nested 9,000 levels deep is compared without overflowing the stack', () => {
    const deep = (leaf: string) => {
      let value: unknown = leaf;
      for (let i = 0; i < 9_000; i++) value = { x: value };
      return value as Record<string, unknown>;
    };
    expect(
      isRelevantChange(
        sampleUpdate(
          { metadata: { name: 's' }, spec: deep('a') },
          { metadata: { name: 's' }, spec: deep('b') },
        ),
      ),
    ).to.deep.equal(SAMPLE_EVENT);
    expect(
      isRelevantChange(
        sampleUpdate(
          { metadata: { name: 's' }, spec: deep('a') },
          { metadata: { name: 's' }, spec: deep('a') },
        ),
      ),
    ).to.equal(undefined);
  });

  it('a no-op update (identical objects, same resourceVersion) sends nothing', () => {
    const meta = { name: 's', namespace: 'ns', resourceVersion: '7', labels: { a: 'b' } };
    expect(
      isRelevantChange(
        sampleUpdate({ metadata: meta, spec: { replicas: 1 } }, { metadata: meta, spec: { replicas: 1 } }),
      ),
    ).to.equal(undefined);
  });

  it('a spec field removed is a change', () => {
    const event = isRelevantChange(
      sampleUpdate(
        { metadata: { name: 's' }, spec: { replicas: 1, greeting: 'hi' } },
        { metadata: { name: 's' }, spec: { replicas: 1 } },
      ),
    );
    expect(event).to.deep.equal({ ...SAMPLE_EVENT, watched: { Namespace: 'ns', Name: 's' } });
  });

  it('spec added to an object that had none is a change', () => {
    const event = isRelevantChange(
      sampleUpdate({ metadata: { name: 's' } }, { metadata: { name: 's' }, spec: {} }),
    );
    expect(event).to.not.equal(undefined);
  });

  it('an object without spec whose only difference is resourceVersion/managedFields sends nothing', () => {
    const event = isRelevantChange(
      sampleUpdate(
        { metadata: { name: 's', resourceVersion: '1', managedFields: [{ manager: 'a' }] } },
        { metadata: { name: 's', resourceVersion: '2', managedFields: [{ manager: 'b' }] } },
      ),
    );
    expect(event).to.equal(undefined);
  });

  it('a status-subresource update that changes nothing sends nothing even if spec differs in the review', () => {
    // The API server ignores spec on /status; only status counts there.
    const event = isRelevantChange(
      sampleUpdate(
        { metadata: { name: 's' }, spec: { replicas: 1 }, status: { state: 'Ready' } },
        { metadata: { name: 's' }, spec: { replicas: 2 }, status: { state: 'Ready' } },
        'status',
      ),
    );
    expect(event).to.equal(undefined);
  });

  it('deletionTimestamp already set before sends nothing for an unchanged spec', () => {
    const meta = { name: 's', deletionTimestamp: '2026-11-21T10:00:00Z' };
    const event = isRelevantChange(
      sampleUpdate({ metadata: { ...meta, finalizers: ['x'] }, spec: {} }, { metadata: meta, spec: {} }),
    );
    expect(event).to.equal(undefined);
  });

  it('takes the name from the request when the object has none, and empty namespace for cluster scope', () => {
    const event = isRelevantChange(
      review({
        apiVersion: 'admission.k8s.io/v1',
        kind: 'AdmissionReview',
        request: {
          uid: 'own-2',
          kind: { group: 'operator.kyma-project.io', version: 'v1beta2', kind: 'Kyma' },
          resource: { group: 'operator.kyma-project.io', version: 'v1beta2', resource: 'kymas' },
          name: 'default',
          operation: 'DELETE',
          oldObject: null,
        },
      }),
    );
    expect(event).to.deep.equal({
      watched: { Namespace: '', Name: 'default' },
      watchedGvk: { group: 'operator.kyma-project.io', version: 'v1beta2', kind: 'Kyma' },
    });
  });
});

describe('sameJson', () => {
  it('ignores key order, not array order', () => {
    expect(sameJson({ a: 1, b: [1, 2] }, { b: [1, 2], a: 1 })).to.equal(true);
    expect(sameJson([1, 2], [2, 1])).to.equal(false);
    expect(sameJson({ a: 1 }, { a: 1, b: null })).to.equal(false);
    expect(sameJson({ a: [] }, { a: {} })).to.equal(false);
    expect(sameJson(null, {})).to.equal(false);
  });
});

describe('relevance properties', () => {
  /** The same JSON with object keys in another order. */
  function reordered(value: unknown): unknown {
    if (Array.isArray(value)) return value.map(reordered);
    if (value === null || typeof value !== 'object') return value;
    return Object.fromEntries(
      Object.entries(value)
        .reverse()
        .map(([k, v]) => [k, reordered(v)]),
    );
  }
  const spec = fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 6 });

  it('an update whose spec is the same JSON in any key order is never relevant', () => {
    fc.assert(
      fc.property(spec, (s) => {
        expect(
          isRelevantChange(
            sampleUpdate(
              { metadata: { name: 's' }, spec: s },
              { metadata: { name: 's' }, spec: reordered(s) as Record<string, unknown> },
            ),
          ),
        ).to.equal(undefined);
      }),
    );
  });

  it('an update whose spec differs is always relevant, and names the object', () => {
    fc.assert(
      fc.property(spec, spec, (a, b) => {
        fc.pre(!sameJson(a, b));
        expect(
          isRelevantChange(
            sampleUpdate({ metadata: { name: 's' }, spec: a }, { metadata: { name: 's' }, spec: b }),
          ),
        ).to.deep.equal(SAMPLE_EVENT);
      }),
    );
  });

  it('sameJson is symmetric and agrees with JSON text equality after key sorting', () => {
    const sortedText = (v: unknown): string =>
      JSON.stringify(v, (_k, x: unknown) =>
        x && typeof x === 'object' && !Array.isArray(x)
          ? Object.fromEntries(Object.entries(x).sort(([p], [q]) => (p < q ? -1 : p > q ? 1 : 0)))
          : x,
      );
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 3 }), fc.jsonValue({ maxDepth: 3 }), (a, b) => {
        expect(sameJson(a, b)).to.equal(sameJson(b, a));
        expect(sameJson(a, b)).to.equal(sortedText(a) === sortedText(b));
        expect(sameJson(a, reordered(a))).to.equal(true);
      }),
    );
  });
});
