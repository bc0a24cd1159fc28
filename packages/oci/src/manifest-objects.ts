// A module's raw manifest: multi-document YAML of Kubernetes objects. Bounded in documents (counted before anything
// is parsed, and again while the stream is read, one document at a time), in the tokens of each document (counted by
// the lexer, which holds one token at a time, before the parser builds anything: a document too big to parse within
// the parse thread's heap is refused in a fraction of a second and without the memory), in aliases so a "billion laughs" document
// cannot expand into gigabytes when the objects are later serialized to be applied, and in the size of each object
// as JSON. This file is pure and synchronous: the agent runs it on the event loop a document at a time, or in a thread of
// its own for a manifest with a large document (bounded-parse.ts).
import { Composer, Lexer, LineCounter, Parser, type YAMLError } from 'yaml';
import { ModuleSourceError } from './errors.js';

export interface ManifestObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; [key: string]: unknown };
  [key: string]: unknown;
}

export interface ObjectBounds {
  maxObjects: number;
  /** Alias nodes, weighted by the size of what they stand for (the `yaml` package's maxAliasCount). */
  maxAliasCount: number;
  /** Bytes of one object as JSON: the API server takes no request body over 3 MiB. */
  maxObjectBytes: number;
  /**
   * Lexical tokens of one document (a key, a value, a separator, a line break each count). A 1 MB CRD has about
   * 190,000; a flow mapping of 100,000 keys, 800,000, and its parse needs more than the parse thread's 96 MiB.
   */
  maxDocumentTokens: number;
}

export const DEFAULT_OBJECT_BOUNDS: ObjectBounds = {
  maxObjects: 5_000,
  maxAliasCount: 100,
  maxObjectBytes: 3 * 1024 * 1024,
  maxDocumentTokens: 500_000,
};

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Lines that open a document (`---` at the start of a line): an upper bound of the stream's documents, read in ms. */
export function documentMarkers(text: string): number {
  let markers = text.startsWith('---') ? 1 : 0;
  for (let at = text.indexOf('\n---'); at !== -1; at = text.indexOf('\n---', at + 4)) markers++;
  return markers;
}

/** The number (from 1) of the first document with more than `max` lexical tokens; undefined when none has. */
export function documentOverTokens(text: string, max: number): number | undefined {
  let document = 1;
  let tokens = 0;
  let content = false;
  for (const token of new Lexer().lex(text)) {
    // The lexer's marker of a stream's start (U+0002) is not content.
    if (token === '\u0002') continue;
    if (token === '---' || token === '...') {
      // A marker before any content opens the first document rather than a second.
      if (content) document++;
      tokens = 0;
      content = false;
      continue;
    }
    content = true;
    if (++tokens > max) return document;
  }
  return undefined;
}

/** The parser's message with where it happened, as the `yaml` package's own parse functions give it. */
function located(error: YAMLError, lines: LineCounter): string {
  const { line, col } = lines.linePos(error.pos[0]);
  return `${error.message} at line ${line}, column ${col}`;
}

/** One object of the stream as JSON, each checked as parseManifestObjects checks it. */
export function* manifestObjectsAsJson(
  text: string,
  what: string,
  bounds: ObjectBounds = DEFAULT_OBJECT_BOUNDS,
): Generator<string> {
  const malformed = (detail: string, cause?: unknown) =>
    new ModuleSourceError('MalformedManifest', `${what}: ${detail}`, cause === undefined ? {} : { cause });
  const tooMany = () =>
    new ModuleSourceError('TooLarge', `${what}: more than ${bounds.maxObjects} YAML documents`);
  // One document more than the bound may be the empty one before the first marker.
  if (documentMarkers(text) > bounds.maxObjects + 1) throw tooMany();
  const overTokens = documentOverTokens(text, bounds.maxDocumentTokens);
  if (overTokens !== undefined)
    throw new ModuleSourceError(
      'TooLarge',
      `${what}: document ${overTokens} has more than ${bounds.maxDocumentTokens} YAML tokens, over the bound a parse fits in (split it into smaller objects)`,
    );
  const lines = new LineCounter();
  const composer = new Composer({ uniqueKeys: false });
  let index = 0;
  for (const document of composer.compose(new Parser(lines.addNewLine).parse(text))) {
    index++;
    if (index > bounds.maxObjects) throw tooMany();
    const place = `document ${index}`;
    const error = document.errors[0];
    if (error) throw malformed(`${place} is not valid YAML: ${located(error, lines)}`, error);
    let value: unknown;
    try {
      value = document.toJS({ maxAliasCount: bounds.maxAliasCount });
    } catch (cause) {
      const aliases = /alias/i.test((cause as Error).message);
      throw malformed(
        aliases
          ? `${place} uses more YAML aliases than the bound of ${bounds.maxAliasCount} (an alias bomb?)`
          : `${place}: ${(cause as Error).message}`,
        cause,
      );
    }
    if (value === null || value === undefined) continue;
    if (!isRecord(value)) throw malformed(`${place} is not a mapping`);
    const { apiVersion, kind, metadata } = value;
    if (typeof apiVersion !== 'string' || apiVersion === '' || typeof kind !== 'string' || kind === '') {
      throw malformed(`${place} has no apiVersion and kind`);
    }
    if (!isRecord(metadata) || typeof metadata['name'] !== 'string' || metadata['name'] === '') {
      throw malformed(`${place} (${kind}) has no metadata.name`);
    }
    if (metadata['namespace'] !== undefined && typeof metadata['namespace'] !== 'string') {
      throw malformed(`${place} (${kind} ${metadata['name']}) has a metadata.namespace that is not a string`);
    }
    const json = JSON.stringify(value);
    if (json.length > bounds.maxObjectBytes)
      throw new ModuleSourceError(
        'TooLarge',
        `${what}: ${place} (${kind} ${metadata['name']}) is ${json.length} bytes as JSON, over the bound of ${bounds.maxObjectBytes} (the API server takes no larger request)`,
      );
    yield json;
  }
}

/** Parses the YAML into objects, each with apiVersion, kind and metadata.name; empty documents are skipped. */
export function parseManifestObjects(
  text: string,
  what: string,
  bounds: ObjectBounds = DEFAULT_OBJECT_BOUNDS,
): ManifestObject[] {
  return [...manifestObjectsAsJson(text, what, bounds)].map((json) => JSON.parse(json) as ManifestObject);
}
