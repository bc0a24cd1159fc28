// A raw manifest is parsed within heap and time bounds: a module's content, at any size, costs that module a parse that
// fails with the bound it crossed, never the process its memory or its event loop (a 4 MB flow mapping takes the
// `yaml` package over 10 s and about a gigabyte to compose).
//
// A manifest of at most 64 Ki characters whose documents have at most 5,000 YAML tokens each (the common case: a
// module's CRD, RBAC, Deployment and Service) is parsed on the event loop, a document at a time with a turn for other
// work after each: such a document costs at most about 0.1 s and 5 MiB (measured on a process's first parse). Any
// other manifest goes to a thread of its own, with its own heap bound, terminated at the time bound; a thread costs
// 11–13 MiB while it runs, where the inline parse of a 20 kB module costs about 4. The objects come back from the
// thread as JSON, one string per object, and are read in slices that yield to the event loop.
import { Worker } from 'node:worker_threads';
import { isModuleSourceError, ModuleSourceError } from './errors.js';
import {
  DEFAULT_OBJECT_BOUNDS,
  documentOverTokens,
  manifestObjectsAsJson,
  type ManifestObject,
  type ObjectBounds,
} from './manifest-objects.js';
import type { ParseAnswer, ParseRequest } from './manifest-parse-worker.js';

export interface ParseLimits {
  /** The parse thread's V8 old generation (default 96 MiB). */
  heapMb: number;
  /** How long a parse may take before its thread is terminated (default 30 s). */
  timeoutMs: number;
  /** Parse threads at once in this process (default 1): each may take its heap bound, beside the agent's own. */
  concurrency: number;
  /** A manifest of at most this many characters (default 64 Ki) may be parsed on the event loop… */
  inlineChars: number;
  /** …when none of its documents has more YAML tokens than this (default 5,000; 0 sends every parse to a thread). */
  inlineDocumentTokens: number;
}

export const DEFAULT_PARSE_LIMITS: ParseLimits = {
  heapMb: 96,
  timeoutMs: 30_000,
  concurrency: 1,
  inlineChars: 64 * 1024,
  inlineDocumentTokens: 5_000,
};

/** Whether `text` is parsed on the event loop: small, and each document within the inline token bound (lexed only). */
export function parsesInline(text: string, limits: ParseLimits = DEFAULT_PARSE_LIMITS): boolean {
  return (
    limits.inlineDocumentTokens > 0 &&
    text.length <= limits.inlineChars &&
    documentOverTokens(text, limits.inlineDocumentTokens) === undefined
  );
}

const timedOut = (what: string, limits: ParseLimits) =>
  `${what}: parsing took longer than the bound of ${limits.timeoutMs / 1000} s`;

/** What the parse on the event loop could not answer: the thread, with its deeper stack, answers it. */
class NeedsThread extends Error {}

/**
 * The parse on the event loop: the same checks as the thread's (manifest-objects.ts), a document at a time, with a
 * turn for other work after each and the time bound checked between them. A document nested deeper than this stack
 * allows (the thread's is four times as deep) is left to the thread, so both give the same answer to the same text.
 */
async function parseInline(
  text: string,
  what: string,
  bounds: ObjectBounds,
  limits: ParseLimits,
): Promise<ManifestObject[]> {
  const deadline = performance.now() + limits.timeoutMs;
  const objects: ManifestObject[] = [];
  try {
    for (const json of manifestObjectsAsJson(text, what, bounds)) {
      objects.push(JSON.parse(json) as ManifestObject);
      await new Promise((resolve) => setImmediate(resolve));
      if (performance.now() > deadline) throw new ModuleSourceError('TooLarge', timedOut(what, limits));
    }
  } catch (error) {
    // The `yaml` package reports a stack overflow as the document's error; anything else thrown is unforeseen.
    const overflow = error instanceof Error && error.message.includes('Maximum call stack size exceeded');
    if (isModuleSourceError(error) && !overflow) throw error;
    throw new NeedsThread(what, { cause: error });
  }
  return objects;
}

// Run from source (tests, the demo) the thread loads the TypeScript file; built or bundled, the JavaScript one,
// which the agent's bundle writes next to itself under the same name.
const WORKER_URL = new URL(
  import.meta.url.endsWith('.ts') ? './manifest-parse-worker.ts' : './manifest-parse-worker.js',
  import.meta.url,
);

/** Objects read back per slice before the event loop gets a turn. */
const OBJECTS_PER_SLICE = 50;

/** At most `concurrency` holders at once; the others wait in order. */
function semaphore(concurrency: number): () => Promise<() => void> {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async () => {
    while (running >= concurrency) await new Promise<void>((resolve) => waiting.push(resolve));
    running++;
    return () => {
      running--;
      waiting.shift()?.();
    };
  };
}

function runParse(request: ParseRequest, limits: ParseLimits): Promise<ParseAnswer> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER_URL, {
      workerData: request,
      name: 'skr-manifest-parse',
      resourceLimits: { maxOldGenerationSizeMb: limits.heapMb, maxYoungGenerationSizeMb: 8 },
    });
    let settled = false;
    const settle = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      outcome();
    };
    const timer = setTimeout(() => {
      settle(() =>
        resolve({
          ok: false,
          reason: 'TooLarge',
          message: timedOut(request.what, limits),
        }),
      );
      void worker.terminate();
    }, limits.timeoutMs);
    worker.once('message', (message: ParseAnswer) => settle(() => resolve(message)));
    worker.once('error', (error: Error & { code?: string }) =>
      settle(() =>
        error.code === 'ERR_WORKER_OUT_OF_MEMORY'
          ? resolve({
              ok: false,
              reason: 'TooLarge',
              message: `${request.what}: parsing needs more memory than the bound of ${limits.heapMb} MiB`,
            })
          : reject(new Error(`${request.what}: the parse thread failed`, { cause: error })),
      ),
    );
    worker.once('exit', (code) =>
      settle(() => reject(new Error(`${request.what}: the parse thread exited with code ${code}`))),
    );
  });
}

export type ManifestParser = (text: string, what: string, bounds?: ObjectBounds) => Promise<ManifestObject[]>;

/**
 * A parser of raw manifests within `limits` (one per module source, so one per process): small ones on the event loop
 * in turns, the others in a thread; a bound crossed is a `TooLarge` ModuleSourceError that names it.
 */
export function createManifestParser(given: Partial<ParseLimits> = {}): ManifestParser {
  const limits = { ...DEFAULT_PARSE_LIMITS, ...given };
  const slot = semaphore(limits.concurrency);
  return async (text, what, bounds = DEFAULT_OBJECT_BOUNDS) => {
    if (parsesInline(text, limits)) {
      try {
        return await parseInline(text, what, bounds, limits);
      } catch (error) {
        if (!(error instanceof NeedsThread)) throw error;
      }
    }
    const release = await slot();
    let answer: ParseAnswer;
    try {
      answer = await runParse({ text, what, bounds }, limits);
    } finally {
      release();
    }
    if (!answer.ok) throw new ModuleSourceError(answer.reason, answer.message);
    const objects: ManifestObject[] = [];
    for (const [index, json] of answer.objects.entries()) {
      if (index > 0 && index % OBJECTS_PER_SLICE === 0) await new Promise((resolve) => setImmediate(resolve));
      objects.push(JSON.parse(json) as ManifestObject);
    }
    return objects;
  };
}
