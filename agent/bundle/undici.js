// What the agent's bundle gets for `import … from 'undici'` (agent/bundle.js resolves the name here). undici's own
// index.js loads all of undici: mock agents, cache stores, WebSocket, EventSource, cookies, CacheStorage and a dozen
// dispatchers the agent never makes, whose source would stay in every replica's memory. This module takes what the
// bundle's code imports (packages/kube, packages/oci and client-node's dist) from the files that define it, and does
// what index.js does for those. It is an ES module on purpose: esbuild fails the build when a file imports a name
// from an ES module that does not export it, so a new `import { X } from 'undici'` cannot silently get undefined.
import { fileURLToPath } from 'node:url';
import api from 'undici/lib/api/index.js';
import buildConnector from 'undici/lib/core/connect.js';
import Agent from 'undici/lib/dispatcher/agent.js';
import Dispatcher from 'undici/lib/dispatcher/dispatcher.js';
import ProxyAgent from 'undici/lib/dispatcher/proxy-agent.js';
import { getGlobalDispatcher } from 'undici/lib/global.js';
import { fetch as fetchImpl } from 'undici/lib/web/fetch/index.js';

// index.js gives every dispatcher request(), stream(), pipeline(), connect() and upgrade(). The agent calls
// request() on its own Agents and on the global one, and ProxyAgent opens its tunnel with connect(): without this
// they would not be there.
Object.assign(Dispatcher.prototype, api);

// The global dispatcher is lib/global.js's, as index.js exports it: one Agent under undici's global symbol, the one
// fetch() uses when it is given no dispatcher.
export { Agent, ProxyAgent, buildConnector, getGlobalDispatcher };

// index.js's fetch: the implementation's, with the caller's stack added to an error whose stack does not pass
// through index.js's file. Bundled, that file (its __filename) was the bundle; here it is import.meta.url, which
// agent/bundle.js defines as the bundle's URL, so errors get the stacks undici's index.js gave them. (index.js's other
// branch, for a bundle without __filename, cannot be taken here.)
const currentFilename = fileURLToPath(import.meta.url);

function appendFetchStackTrace(err, filename) {
  if (!err || typeof err !== 'object') return;
  const stack = typeof err.stack === 'string' ? err.stack : '';
  const normalizedFilename = filename.replace(/\\/g, '/');
  if (stack && (stack.includes(filename) || stack.includes(normalizedFilename))) return;
  const capture = {};
  Error.captureStackTrace(capture, appendFetchStackTrace);
  if (!capture.stack) return;
  const captureLines = capture.stack.split('\n').slice(1).join('\n');
  err.stack = stack ? `${stack}\n${captureLines}` : capture.stack;
}

export function fetch(init, options = undefined) {
  return fetchImpl(init, options).catch((err) => {
    appendFetchStackTrace(err, currentFilename);
    throw err;
  });
}
