// What the agent's bundle holds (agent/bundle.js, decision 017): its source text stays in every replica's memory
// whether it runs or not, so client-node's API groups the agent never calls, second copies of one package version, an
// HTTP framework and the parts of undici its index loads for others must not be in it. Read from the bundle and from
// its source map, which names every file bundled.
import { readFile } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

const BUNDLE = fileURLToPath(new URL('../dist/bundle/', import.meta.url));

async function bundledFiles(): Promise<string[]> {
  const map = JSON.parse(await readFile(join(BUNDLE, 'main.cjs.map'), 'utf8')) as { sources: string[] };
  return map.sources.map((source) => join(BUNDLE, source));
}

/** The package root of a file below node_modules, e.g. `…/node_modules/send/node_modules/mime-db`. */
function packageRoot(file: string): { name: string; root: string } | undefined {
  const marker = `node_modules${sep}`;
  const at = file.lastIndexOf(marker);
  if (at < 0) return undefined;
  const parts = file.slice(at + marker.length).split(sep);
  const name = parts[0]?.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] as string);
  return { name, root: file.slice(0, at + marker.length) + name };
}

describe('the agent bundle holds what the agent runs, once', () => {
  it('keeps client-node API groups the agent never calls out (apps, storage, networking, batch)', async () => {
    const text = await readFile(join(BUNDLE, 'main.cjs'), 'utf8');
    const requestFactory = (group: string) => new RegExp(`\\b${group}ApiRequestFactory\\b`).test(text);
    expect(requestFactory('CoreV1')).to.equal(true);
    for (const unused of ['AppsV1', 'StorageV1', 'NetworkingV1', 'BatchV1'])
      expect(requestFactory(unused), `${unused} in the bundle`).to.equal(false);
  });

  it('bundles each package version from one place', async () => {
    const roots = new Map<string, Set<string>>();
    const versions = new Map<string, string>();
    for (const file of await bundledFiles()) {
      const found = packageRoot(file);
      if (!found) continue;
      if (!versions.has(found.root)) {
        const manifest = await readFile(join(found.root, 'package.json'), 'utf8');
        versions.set(found.root, (JSON.parse(manifest) as { version: string }).version);
      }
      const key = `${found.name}@${versions.get(found.root)}`;
      roots.set(key, (roots.get(key) ?? new Set()).add(found.root));
    }
    const repeated = [...roots].filter(([, places]) => places.size > 1).map(([key]) => key);
    expect(repeated).to.deep.equal([]);
  });

  it("holds of undici what the agent uses, not its index's mocks, caches, web APIs or Milo parser", async () => {
    const undici: string[] = [];
    for (const file of await bundledFiles()) {
      const found = packageRoot(file);
      if (found?.name === 'undici') undici.push(relative(found.root, file).split(sep).join('/'));
    }
    for (const used of ['lib/dispatcher/agent.js', 'lib/dispatcher/proxy-agent.js', 'lib/web/fetch/index.js'])
      expect(undici, `${used} in the bundle`).to.include(used);
    // index.js requires all of undici; agent/bundle.js resolves `undici` to agent/bundle/undici.js instead.
    const leftOut = [
      'index.js',
      'lib/mock/',
      'lib/cache/',
      'lib/interceptor/',
      'lib/web/websocket/',
      'lib/milo/',
    ];
    for (const left of leftOut)
      expect(
        undici.filter((file) => file.startsWith(left)),
        `undici's ${left} in the bundle`,
      ).to.deep.equal([]);
  });

  it('holds no HTTP framework: the health, event-stream and console servers route on node:http', async () => {
    const packages = new Set((await bundledFiles()).map((file) => packageRoot(file)?.name));
    for (const framework of ['express', 'body-parser', 'iconv-lite', 'mime-db', 'router', 'qs'])
      expect(packages.has(framework), `${framework} in the bundle`).to.equal(false);
  });
});
