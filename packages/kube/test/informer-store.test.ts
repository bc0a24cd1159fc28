// The informer's cache on its own: indexes follow every change, handlers hear each change once (and a throwing one
// stops nothing), an object this process wrote is not overwritten by an older copy, a relist replaces the cache.
// Also what of an object from the API server is cached (acceptObject). No API server: the store holds no connection.
import { expect } from 'chai';
import { createLogger } from '@skr-watcher/telemetry';
import { acceptObject } from '../src/informer/accept.js';
import { InformerStore, objectKey, revisionOf } from '../src/informer/store.js';
import type { CachedObject } from '../src/informer/types.js';

interface Labelled extends CachedObject {
  metadata: { name: string; namespace?: string; resourceVersion?: string; labels?: Record<string, string> };
}

function object(name: string, resourceVersion: string, labels: Record<string, string> = {}): Labelled {
  return { metadata: { name, namespace: 'ns', resourceVersion, labels } };
}

/** A store indexed by the `team` label, recording what its handlers heard. */
function teamStore() {
  const sizes: number[] = [];
  const heard: string[] = [];
  const store = new InformerStore<Labelled>({ resource: 'things', onSize: (size) => sizes.push(size) });
  store.addIndex('team', (o) => (o.metadata.labels?.['team'] ? [o.metadata.labels['team']] : []));
  store.addHandler({
    onAdd: (o) => heard.push(`add ${o.metadata.name}@${o.metadata.resourceVersion}`),
    onUpdate: (prev, o) =>
      heard.push(`update ${o.metadata.name}@${prev.metadata.resourceVersion}->${o.metadata.resourceVersion}`),
    onDelete: (o) => heard.push(`delete ${o.metadata.name}`),
  });
  const team = (value: string) => store.byIndex('team', value).map(objectKey);
  return { store, heard, sizes, team };
}

describe('InformerStore', () => {
  it('keeps an index in step with adds, label changes and deletes, and reports the size after each', () => {
    const { store, heard, sizes, team } = teamStore();
    store.upsertFromServer(object('a', '1', { team: 'red' }));
    store.upsertFromServer(object('b', '2', { team: 'red' }));
    expect(team('red')).to.deep.equal(['ns/a', 'ns/b']);
    store.upsertFromServer(object('a', '3', { team: 'blue' }));
    expect(team('red')).to.deep.equal(['ns/b']);
    expect(team('blue')).to.deep.equal(['ns/a']);
    store.remove(object('b', '4'));
    expect(team('red')).to.deep.equal([]);
    expect(store.keys()).to.deep.equal(['ns/a']);
    expect(heard).to.deep.equal(['add a@1', 'add b@2', 'update a@1->3', 'delete b']);
    expect(sizes).to.deep.equal([1, 2, 2, 1]);
  });

  it('indexes the objects cached before the index was added, and names the resource for an unknown index', () => {
    const store = new InformerStore<Labelled>({ resource: 'things' });
    store.upsertFromServer(object('a', '1', { team: 'red' }));
    store.addIndex('team', (o) => [o.metadata.labels?.['team'] ?? '']);
    expect(store.byIndex('team', 'red').map(objectKey)).to.deep.equal(['ns/a']);
    expect(() => store.byIndex('owner', 'x')).to.throw('informer things has no index owner');
  });

  it('does nothing for the delete of an object it does not hold', () => {
    const { store, heard, sizes } = teamStore();
    store.remove(object('never-seen', '1'));
    expect(heard).to.deep.equal([]);
    expect(sizes).to.deep.equal([]);
  });

  it('takes a written object only when it is newer than the cached copy, and keeps older server copies off it', () => {
    const { store, heard } = teamStore();
    store.upsertFromServer(object('a', '10'));
    expect(store.takeWritten(object('a', '9'))).to.equal(false);
    expect(store.takeWritten(object('a', '10'))).to.equal(false);
    expect(store.takeWritten(object('a', 'not-a-number'))).to.equal(false);
    expect(store.takeWritten(object('a', '12'))).to.equal(true);
    // The watch event of an earlier write arrives late: not cached over the newer one.
    store.upsertFromServer(object('a', '11'));
    expect(store.get('ns/a')?.metadata.resourceVersion).to.equal('12');
    // The server's copy catches up: cached, and later copies are taken as usual.
    store.upsertFromServer(object('a', '12'));
    store.upsertFromServer(object('a', '13'));
    expect(store.get('ns/a')?.metadata.resourceVersion).to.equal('13');
    expect(heard).to.deep.equal(['add a@10', 'update a@10->12', 'update a@12->12', 'update a@12->13']);
  });

  it('takes a written object it does not hold yet, and forgets it was ahead once the object is deleted', () => {
    const { store } = teamStore();
    expect(store.takeWritten(object('a', '20'))).to.equal(true);
    store.remove(object('a', '21'));
    // Created again with a lower revision than the one written: nothing keeps it out any more.
    store.upsertFromServer(object('a', '5'));
    expect(store.get('ns/a')?.metadata.resourceVersion).to.equal('5');
  });

  it('replaces its content with a complete list: unlisted objects are deleted, listed ones added or updated', () => {
    const { store, heard } = teamStore();
    store.upsertFromServer(object('gone', '1'));
    store.upsertFromServer(object('kept', '2'));
    heard.length = 0;
    store.replaceWith(
      new Map([
        ['ns/kept', object('kept', '3')],
        ['ns/new', object('new', '4')],
      ]),
    );
    expect(store.keys().sort()).to.deep.equal(['ns/kept', 'ns/new']);
    expect(heard).to.deep.equal(['delete gone', 'update kept@2->3', 'add new@4']);
  });

  it('replays every cached object to onUpdate as itself', () => {
    const { store, heard } = teamStore();
    store.upsertFromServer(object('a', '1'));
    store.upsertFromServer(object('b', '2'));
    heard.length = 0;
    store.replay();
    expect(heard).to.deep.equal(['update a@1->1', 'update b@2->2']);
  });

  it('logs a handler that throws and still tells the other handlers', () => {
    const lines: { level: string; msg: string }[] = [];
    const logger = createLogger('test', 'debug', {
      write: (line: string) => void lines.push(JSON.parse(line) as { level: string; msg: string }),
    });
    const store = new InformerStore<Labelled>({ resource: 'things', logger });
    const heard: string[] = [];
    store.addHandler({
      onAdd: () => {
        throw new Error('handler bug');
      },
    });
    store.addHandler({ onAdd: (o) => heard.push(o.metadata.name) });
    store.upsertFromServer(object('a', '1'));
    expect(heard).to.deep.equal(['a']);
    expect(store.get('ns/a')).to.not.equal(undefined);
    expect(lines.map((l) => `${l.level} ${l.msg}`)).to.deep.equal(['error informer handler threw']);
  });
});

describe('objectKey and revisionOf', () => {
  it('key namespaced objects as namespace/name and cluster-scoped ones as name', () => {
    expect(objectKey({ metadata: { name: 'a', namespace: 'ns' } })).to.equal('ns/a');
    expect(objectKey({ metadata: { name: 'node-1' } })).to.equal('node-1');
  });

  it('read a resourceVersion as an etcd revision, and nothing that is not a number', () => {
    expect(revisionOf({ metadata: { resourceVersion: '18446744073709551615' } })).to.equal(
      18446744073709551615n,
    );
    expect(revisionOf({ metadata: { resourceVersion: '12a' } })).to.equal(undefined);
    expect(revisionOf({ metadata: { resourceVersion: '' } })).to.equal(undefined);
    expect(revisionOf({ metadata: {} })).to.equal(undefined);
  });
});

describe('acceptObject', () => {
  const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';
  const keep = <T>(o: T) => o;

  it('drops managedFields and the last-applied annotation, and keeps every other field', () => {
    const accepted = acceptObject<CachedObject>(
      {
        kind: 'Secret',
        data: { key: 'dmFsdWU=' },
        metadata: {
          name: 'a',
          labels: { team: 'red' },
          managedFields: [{ manager: 'kubectl' }],
          annotations: { [LAST_APPLIED]: '{"kind":"Secret"}', owner: 'me' },
        },
      },
      keep,
    );
    expect(accepted).to.deep.equal({
      kind: 'Secret',
      data: { key: 'dmFsdWU=' },
      metadata: { name: 'a', labels: { team: 'red' }, annotations: { owner: 'me' } },
    });
  });

  it('drops the annotations field when the last-applied annotation was its only entry', () => {
    const accepted = acceptObject<CachedObject>(
      { metadata: { name: 'a', annotations: { [LAST_APPLIED]: '{}' } } },
      keep,
    );
    expect(accepted?.metadata).to.deep.equal({ name: 'a' });
  });

  it('refuses objects without a name, with a warning, and applies the transform to the others', () => {
    const lines: { level: string; msg: string }[] = [];
    const logger = createLogger('test', 'debug', {
      write: (line: string) => void lines.push(JSON.parse(line) as { level: string; msg: string }),
    });
    const named = (o: CachedObject) => ({ ...o, transformed: true });
    for (const raw of [null, 'text', {}, { metadata: {} }, { metadata: { name: '' } }]) {
      expect(acceptObject(raw, named, logger)).to.equal(undefined);
    }
    expect(lines.map((l) => l.level)).to.deep.equal(['warn', 'warn', 'warn', 'warn', 'warn']);
    expect(acceptObject({ metadata: { name: 'a' } }, named, logger)).to.deep.equal({
      metadata: { name: 'a' },
      transformed: true,
    });
  });
});
