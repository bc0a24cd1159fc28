import { expect } from 'chai';
import {
  eventPath,
  hasFingerprint,
  parseEventPath,
  parseWatchEvent,
  showsChange,
  watchEventFor,
} from '../src/index.js';

const good = {
  watched: { Namespace: 'kyma-system', Name: 'default' },
  watchedGvk: { group: 'operator.kyma-project.io', version: 'v1beta2', kind: 'Kyma' },
};

describe('callback event contract', () => {
  it('accepts the reference v2 body and types it', () => {
    const result = parseWatchEvent('v2', good);
    expect(result).to.deep.equal({ ok: true, value: good });
  });

  it('accepts a cluster-scoped object (empty namespace) and the core group', () => {
    const body = {
      watched: { Namespace: '', Name: 'n1' },
      watchedGvk: { group: '', version: 'v1', kind: 'Node' },
    };
    expect(parseWatchEvent('v2', body).ok).to.equal(true);
  });

  it('requires owner in v1 and accepts it', () => {
    expect(parseWatchEvent('v1', good)).to.deep.include({ ok: false });
    const v1 = { ...good, owner: { Namespace: 'kcp-system', Name: 'skr1' } };
    expect(parseWatchEvent('v1', v1)).to.deep.equal({ ok: true, value: v1 });
  });

  it('accepts an API version with a hyphen, as CRDs may serve (v1-alpha)', () => {
    const body = { ...good, watchedGvk: { ...good.watchedGvk, version: 'v1-alpha' } };
    expect(parseWatchEvent('v2', body)).to.deep.equal({ ok: true, value: body });
  });

  it('accepts and keeps the optional fingerprint fields; drops fields it does not know', () => {
    const body = { ...good, uid: 'u-1', generation: 3, previousResourceVersion: '41' };
    expect(parseWatchEvent('v2', { ...body, future: true })).to.deep.equal({ ok: true, value: body });
  });

  const bad: [string, unknown, RegExp][] = [
    [
      'a version ending in a hyphen',
      { ...good, watchedGvk: { ...good.watchedGvk, version: 'v1-' } },
      /watchedGvk\.version/,
    ],
    ['a negative generation', { ...good, generation: -1 }, /generation/],
    ['a fractional generation', { ...good, generation: 1.5 }, /generation/],
    ['a numeric uid', { ...good, uid: 5 }, /uid/],
    [
      'an empty previous resourceVersion',
      { ...good, previousResourceVersion: '' },
      /previousResourceVersion/,
    ],
    ['null body', null, /\(body\)/],
    ['an array', [good], /\(body\)/],
    ['lower-case keys of watched', { ...good, watched: { namespace: 'a', name: 'b' } }, /watched\.Namespace/],
    ['an empty name', { ...good, watched: { Namespace: 'a', Name: '' } }, /watched\.Name/],
    ['a name with upper case', { ...good, watched: { Namespace: 'a', Name: 'Bad' } }, /watched\.Name/],
    [
      'a 254-character name',
      { ...good, watched: { Namespace: 'a', Name: 'a'.repeat(254) } },
      /watched\.Name/,
    ],
    ['a numeric version', { ...good, watchedGvk: { ...good.watchedGvk, version: 2 } }, /watchedGvk\.version/],
    ['a missing kind', { ...good, watchedGvk: { group: 'g', version: 'v1' } }, /watchedGvk\.kind/],
    [
      'a kind with spaces',
      { ...good, watchedGvk: { ...good.watchedGvk, kind: 'Ky ma' } },
      /watchedGvk\.kind/,
    ],
  ];
  for (const [name, body, field] of bad) {
    it(`rejects ${name} and names the field`, () => {
      const result = parseWatchEvent('v2', body);
      expect(result.ok).to.equal(false);
      if (!result.ok) expect(result.error).to.match(field);
    });
  }

  it('builds the body the webhook sends', () => {
    expect(watchEventFor({ namespace: 'kyma-system', name: 'default' }, good.watchedGvk)).to.deep.equal(good);
  });

  it('builds the fingerprint fields only when given', () => {
    const fingerprint = { uid: 'u-1', generation: 2, previousResourceVersion: '7' };
    expect(
      watchEventFor({ namespace: 'kyma-system', name: 'default' }, good.watchedGvk, fingerprint),
    ).to.deep.equal({
      ...good,
      ...fingerprint,
    });
    expect(hasFingerprint({})).to.equal(false);
    expect(hasFingerprint({ generation: 1 })).to.equal(true);
  });

  describe('showsChange: whether a read of the object shows the write an event is about', () => {
    const read = (uid: string, generation: number, resourceVersion: string) => ({
      metadata: { uid, generation, resourceVersion },
    });
    it("an update: once the generation reached the event's and the resourceVersion moved on", () => {
      const update = { uid: 'u', generation: 4, previousResourceVersion: '41' };
      expect(showsChange(update, read('u', 3, '41'))).to.equal(false);
      expect(showsChange(update, read('u', 4, '41'))).to.equal(false);
      expect(showsChange(update, read('u', 4, '42'))).to.equal(true);
      expect(showsChange(update, read('u', 5, '50'))).to.equal(true);
      // Deleted meanwhile, or replaced by another object of the same name: nothing left to wait for.
      expect(showsChange(update, undefined)).to.equal(true);
      expect(showsChange(update, read('v', 1, '41'))).to.equal(true);
    });
    it('a status update (generation unchanged): once the resourceVersion moved on', () => {
      const status = { uid: 'u', generation: 4, previousResourceVersion: '41' };
      expect(showsChange(status, read('u', 4, '43'))).to.equal(true);
    });
    it('a create: once the object exists', () => {
      const create = { uid: 'u', generation: 1 };
      expect(showsChange(create, undefined)).to.equal(false);
      expect(showsChange(create, read('u', 1, '1'))).to.equal(true);
    });
    it("an event without fingerprint (upstream's webhook): every read shows it", () => {
      expect(showsChange({}, undefined)).to.equal(true);
      expect(showsChange({}, read('u', 1, '1'))).to.equal(true);
    });
  });

  it('parses callback paths of both versions and nothing else', () => {
    expect(parseEventPath(eventPath('lifecycle-manager'))).to.deep.equal({
      version: 'v2',
      component: 'lifecycle-manager',
    });
    expect(parseEventPath('/v1/klm/event')).to.deep.equal({ version: 'v1', component: 'klm' });
    for (const path of [
      '/v3/klm/event',
      '/v2/klm/events',
      '/v2//event',
      '/v2/KLM/event',
      '/v2/a/b/event',
      '/v2/klm/event?x=1',
    ]) {
      expect(parseEventPath(path), path).to.equal(undefined);
    }
  });
});
