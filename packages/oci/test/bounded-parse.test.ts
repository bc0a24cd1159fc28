// Raw manifests a careless or hostile module team may publish, parsed as the agent parses them (small ones on the event
// loop a document at a time, the others in a thread with its own heap and time bounds): each ends in a ModuleSourceError
// that names the bound it crossed, and the process that asked goes on parsing other modules.
import { expect } from 'chai';
import {
  createManifestParser,
  DEFAULT_OBJECT_BOUNDS,
  DEFAULT_PARSE_LIMITS,
  documentMarkers,
  documentOverTokens,
  parsesInline,
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

  describe('on the event loop', () => {
    const threadOnly = createManifestParser({ inlineDocumentTokens: 0 });

    it('takes a small manifest of small documents, and sends a large document or a large manifest to the thread', () => {
      expect(parsesInline(configMaps(20, 10))).to.equal(true);
      // One document of 40,000 keys: more tokens than the inline bound, though the text is small enough.
      expect(parsesInline(configMaps(1, 2_000))).to.equal(false);
      expect(parsesInline(flowMapping(2_000))).to.equal(false);
      // Small documents, but more text than the inline bound.
      const many = configMaps(400, 5);
      expect(many.length).to.be.greaterThan(DEFAULT_PARSE_LIMITS.inlineChars);
      expect(parsesInline(many)).to.equal(false);
      expect(parsesInline(configMaps(20, 10), { ...DEFAULT_PARSE_LIMITS, inlineDocumentTokens: 0 })).to.equal(
        false,
      );
    });

    it('gives the objects and the errors the thread gives, for the same inputs', async () => {
      const inputs = [
        configMaps(30, 20),
        'a: [1, 2\n',
        '---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n',
        'apiVersion: v1\nkind: ConfigMap\n',
        '- just\n- a list\n',
        'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: 3}\n',
        `x: &a [1, 1]\ny: &b [*a, *a, *a, *a]\nz: &c [*b, *b, *b, *b]\nw: [*c, *c, *c, *c, *c, *c, *c, *c]\n`,
        `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep}\ndata: ${'['.repeat(2_000)}${']'.repeat(2_000)}\n`,
      ];
      for (const text of inputs) {
        expect(parsesInline(text), text.slice(0, 40)).to.equal(true);
        const settle = (parse: typeof threadOnly) =>
          parse(text, 'raw manifest').then(
            (objects) => ({ objects }),
            (error: { reason?: string; message?: string }) => ({
              reason: error.reason,
              message: error.message,
            }),
          );
        // As JSON: chai's deep comparison would overflow the stack on the deeply nested one.
        expect(JSON.stringify(await settle(parse)), text.slice(0, 40)).to.equal(
          JSON.stringify(await settle(threadOnly)),
        );
      }
    });

    it('gives other work a turn after each document', async () => {
      let turns = 0;
      const ticker = setInterval(() => turns++, 0);
      try {
        const objects = await parse(configMaps(100, 5), 'raw manifest turns');
        expect(objects).to.have.length(100);
      } finally {
        clearInterval(ticker);
      }
      // A timer runs once per turn of the event loop at most: one turn per document or so, not one for all of them.
      expect(turns).to.be.greaterThan(20);
    });

    it('ends a parse at the time bound, between documents', async () => {
      const slow = createManifestParser({ timeoutMs: 1 });
      const text = configMaps(100, 10);
      expect(parsesInline(text)).to.equal(true);
      const error = await failure(slow(text, 'raw manifest slow'), 'TooLarge');
      expect(error.message).to.equal('raw manifest slow: parsing took longer than the bound of 0.001 s');
      await stillParses();
    });
  });
});
