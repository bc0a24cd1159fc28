import { expect } from 'chai';
import { eventPath, parseEventPath, parseWatchEvent, watchEventFor } from '../src/index.js';

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

  const bad: [string, unknown, RegExp][] = [
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
