// Raw manifests a careless or hostile module team may publish, parsed as the agent parses them (in a thread with its
// own heap and time bounds): each ends in a ModuleSourceError that names the bound it crossed, and the process that
// asked goes on parsing other modules.
import { expect } from 'chai';
import {
  createManifestParser,
  DEFAULT_OBJECT_BOUNDS,
  documentMarkers,
  documentOverTokens,
} from '../src/index.js';
import { failure } from './hand-assembled.js';

/** One ConfigMap whose `data` is a flow mapping of `keys` keys: small when gzipped, huge to compose. */
function flowMapping(keys: number): string {
  const entries = Array.from({ length: keys }, (_, index) => `k${index}: v`);
  return `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: flow, namespace: default}\ndata: {${entries.join(', ')}}\n`;
}

function configMaps(count: number, keysEach: number): string {
  let text = '';
  for (let index = 0; index < count; index++) {
    text += `---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-${index}\n  namespace: default\ndata:\n`;
    for (let key = 0; key < keysEach; key++) text += `  key${key}: "${'x'.repeat(30)}"\n`;
  }
  return text;
}

describe('bounded raw-manifest parse', function () {
  this.timeout(120_000);
  const parse = createManifestParser();

  async function stillParses() {
    const objects = await parse(configMaps(2, 1), 'good');
    expect(objects.map((object) => object.metadata.name)).to.deep.equal(['cm-0', 'cm-1']);
  }

  it('refuses a 4 MB flow mapping by its tokens, before the parser builds anything, and the process goes on', async () => {
    const text = flowMapping(420_000);
    expect(text.length).to.be.greaterThan(4_000_000);
    const error = await failure(parse(text, 'raw manifest flow'), 'TooLarge');
    expect(error.message).to.equal(
      `raw manifest flow: document 1 has more than ${DEFAULT_OBJECT_BOUNDS.maxDocumentTokens} YAML tokens, over the bound a parse fits in (split it into smaller objects)`,
    );
    await stillParses();
  });

  it('names the document over the token bound, counting from the first marker', () => {
    const small = 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}\n';
    const text = `---\n${small}---\n${small}---\n${flowMapping(1_000)}`;
    expect(documentOverTokens(text, 1_000)).to.equal(3);
    expect(documentOverTokens(text, 100_000)).to.equal(undefined);
  });

  it('refuses a flow mapping within the token bound at the heap bound, and the process goes on', async () => {
    const text = flowMapping(420_000);
    const bounds = { ...DEFAULT_OBJECT_BOUNDS, maxDocumentTokens: Number.MAX_SAFE_INTEGER };
    const error = await failure(parse(text, 'raw manifest flow', bounds), 'TooLarge');
    expect(error.message).to.equal('raw manifest flow: parsing needs more memory than the bound of 96 MiB');
    await stillParses();
  });

  it('refuses 16 MiB of nested sequences without exhausting anything but its own thread', async () => {
    const depth = 8 * 1024 * 1024;
    const text = `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: n}\ndata: ${'['.repeat(depth)}${']'.repeat(depth)}\n`;
    const error = await failure(parse(text, 'raw manifest nested'));
    expect(error.reason).to.be.oneOf(['TooLarge', 'MalformedManifest']);
    expect(error.message).to.match(/^raw manifest nested: /);
    await stillParses();
  });

  it('refuses 50,000 documents by their markers, before composing any', async () => {
    let text = '';
    for (let index = 0; index < 50_000; index++)
      text += `---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c${index}}\n`;
    expect(documentMarkers(text)).to.equal(50_000);
    const error = await failure(parse(text, 'raw manifest many'), 'TooLarge');
    expect(error.message).to.equal(
      `raw manifest many: more than ${DEFAULT_OBJECT_BOUNDS.maxObjects} YAML documents`,
    );
  });

  it('refuses one object larger as JSON than the API server takes in a request', async () => {
    let text = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n';
    for (let key = 0; key < 1_000; key++) text += `  k${key}: ${'y'.repeat(4_000)}\n`;
    const error = await failure(parse(text, 'raw manifest big'), 'TooLarge');
    expect(error.message).to.include('document 1 (ConfigMap big)').and.include('over the bound of 3145728');
  });

  it('ends a parse at the time bound', async () => {
    const slow = createManifestParser({ timeoutMs: 50 });
    const bounds = { ...DEFAULT_OBJECT_BOUNDS, maxDocumentTokens: Number.MAX_SAFE_INTEGER };
    const error = await failure(slow(flowMapping(100_000), 'raw manifest slow', bounds), 'TooLarge');
    expect(error.message).to.equal('raw manifest slow: parsing took longer than the bound of 0.05 s');
    await stillParses();
  });

  it('parses a module of 2,000 objects (4.4 MB) inside the bounds, in order', async () => {
    const text = configMaps(2_000, 50);
    expect(text.length).to.be.greaterThan(4_000_000);
    const objects = await parse(text, 'raw manifest large');
    expect(objects).to.have.length(2_000);
    expect(objects[1_999]?.metadata.name).to.equal('cm-1999');
    expect(Object.keys(objects[0]?.['data'] as object)).to.have.length(50);
  });

  it('reports where a document is not YAML', async () => {
    const error = await failure(parse('a: [1, 2\n', 'raw manifest broken'), 'MalformedManifest');
    expect(error.message).to.match(
      /^raw manifest broken: document 1 is not valid YAML: .* at line \d+, column \d+$/s,
    );
  });
});
