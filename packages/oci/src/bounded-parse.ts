// A raw manifest is parsed in a thread of its own, with its own heap bound and a time bound: a module's content,
// at any size, costs that module a parse that fails with the bound it crossed, never the process its memory or
// its event loop (a 4 MB flow mapping takes the `yaml` package over 10 s and about a gigabyte to compose). The
// objects come back as JSON, one string per object, and are read in slices that yield to the event loop.
import { Worker } from 'node:worker_threads';
import { ModuleSourceError } from './errors.js';
import { DEFAULT_OBJECT_BOUNDS, type ManifestObject, type ObjectBounds } from './manifest-objects.js';
import type { ParseAnswer, ParseRequest } from './manifest-parse-worker.js';

export interface ParseLimits {
  /** The parse thread's V8 old generation (default 96 MiB). */
  heapMb: number;
  /** How long a parse may take before its thread is terminated (default 30 s). */
  timeoutMs: number;
  /** Parses at once in this process (default 1): each may take its heap bound, beside the agent's own. */
  concurrency: number;
}

export const DEFAULT_PARSE_LIMITS: ParseLimits = { heapMb: 96, timeoutMs: 30_000, concurrency: 1 };

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
          message: `${request.what}: parsing took longer than the bound of ${limits.timeoutMs / 1000} s`,
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
 * A parser of raw manifests off the event loop, within `limits` (one per module source, so one per process); a bound
 * crossed is a `TooLarge` ModuleSourceError that names it.
 */
export function createManifestParser(given: Partial<ParseLimits> = {}): ManifestParser {
  const limits = { ...DEFAULT_PARSE_LIMITS, ...given };
  const slot = semaphore(limits.concurrency);
  return async (text, what, bounds = DEFAULT_OBJECT_BOUNDS) => {
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
