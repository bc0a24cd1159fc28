// The thread a raw manifest is parsed in (bounded-parse.ts): a parse that runs away ends this thread, at its heap
// bound or when it is terminated after the time bound, never the process that asked for it.
import { parentPort, workerData } from 'node:worker_threads';
import { isModuleSourceError } from './errors.js';
import { manifestObjectsAsJson, type ObjectBounds } from './manifest-objects.js';

export interface ParseRequest {
  text: string;
  what: string;
  bounds: ObjectBounds;
}

export type ParseAnswer =
  { ok: true; objects: string[] } | { ok: false; reason: 'TooLarge' | 'MalformedManifest'; message: string };

function answer(request: ParseRequest): ParseAnswer {
  try {
    return { ok: true, objects: [...manifestObjectsAsJson(request.text, request.what, request.bounds)] };
  } catch (error) {
    if (isModuleSourceError(error) && (error.reason === 'TooLarge' || error.reason === 'MalformedManifest'))
      return { ok: false, reason: error.reason, message: error.message };
    // A document nested deeper than the stack allows, or anything else the parser throws.
    const message = error instanceof Error ? error.message : String(error);
    return { ok: false, reason: 'MalformedManifest', message: `${request.what}: ${message}` };
  }
}

parentPort?.postMessage(answer(workerData as ParseRequest));
