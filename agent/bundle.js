// Builds the agent's bundle (dist/bundle), the one file the image runs (decision 017). Run by `npm run bundle` after
// tsc; AGENT_BUNDLE_METAFILE=<file> also writes esbuild's account of what each input added. The source text of every
// bundled module stays in the process's memory whether it runs or not, so what the agent does not need is kept out of
// the file rather than only left unexecuted.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const agentDir = dirname(fileURLToPath(import.meta.url));
const repoDir = join(agentDir, '..');

/**
 * npm nests a package again under each dependent whose range the hoisted copy does not meet, even when those copies
 * are the same version (express 5's accepts, send, type-is and express itself each bring mime-types 3 and mime-db
 * 1.54: four copies of a 150 KB JSON catalog, each parsed into its own maps at start). Every import of a package is
 * resolved to one copy per name and version, the first by path in the lockfile, so the bundle holds each once.
 */
function sameVersionOnce() {
  const lock = JSON.parse(readFileSync(join(repoDir, 'package-lock.json'), 'utf8'));
  /** `name@version` → the lockfile path of the copy every import of it is resolved to. */
  const chosen = new Map();
  for (const path of Object.keys(lock.packages ?? {}).sort()) {
    const entry = lock.packages[path];
    if (!path.includes('node_modules/') || entry.link || !entry.version) continue;
    const name = path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length);
    const key = `${name}@${entry.version}`;
    // An optional dependency for another platform is in the lockfile but not on disk.
    if (!chosen.has(key) && existsSync(join(repoDir, path, 'package.json')))
      chosen.set(key, join(repoDir, path));
  }
  const versions = new Map();
  const versionOf = (root) => {
    if (!versions.has(root))
      versions.set(root, JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version);
    return versions.get(root);
  };
  return {
    name: 'same-version-once',
    setup(bundle) {
      // Bare specifiers only: a package is entered by its name, its own files follow from where it was resolved.
      bundle.onResolve({ filter: /^[^./]/ }, async (args) => {
        if (args.pluginData?.resolvedOnce || args.path.startsWith('node:')) return undefined;
        const resolved = await bundle.resolve(args.path, {
          importer: args.importer,
          resolveDir: args.resolveDir,
          kind: args.kind,
          pluginData: { resolvedOnce: true },
        });
        if (resolved.errors.length > 0 || resolved.external || !resolved.path.includes(`node_modules${sep}`))
          return resolved.errors.length > 0 ? undefined : resolved;
        const at = resolved.path.lastIndexOf(`node_modules${sep}`) + `node_modules${sep}`.length;
        const parts = resolved.path.slice(at).split(sep);
        const name = parts[0]?.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
        const root = resolved.path.slice(0, at) + name;
        const canonical = chosen.get(`${name}@${versionOf(root)}`);
        if (!canonical || canonical === root) return resolved;
        return { ...resolved, path: join(canonical, relative(root, resolved.path)) };
      });
    },
  };
}

/**
 * undici's index.js requires all of undici (mock agents, cache stores, WebSocket, EventSource, cookies, CacheStorage,
 * a dozen dispatchers): nearly a megabyte of source, of which the agent needs about half, for fetch and three of its
 * dispatchers. Every import of the bare name `undici` is resolved to agent/bundle/undici.js, which exports just what
 * the bundle imports, taken from the files that define it. It is an ES module, so esbuild fails the build on an import
 * of a name it lacks (and this plugin on a namespace import's use of one, which esbuild only warns of); a require()
 * or import() of `undici` is refused, as the names read from it could not be checked.
 *
 * The experimental Milo parser (lib/milo, 150 KB of WebAssembly as base64) is loaded by undici's HTTP/1 client only
 * when UNDICI_USE_MILO is set or a Client asks for it: it is left out, and that case fails with an error saying so.
 */
function undiciAsUsed() {
  const used = join(agentDir, 'bundle/undici.js');
  return {
    name: 'undici-as-used',
    setup(bundle) {
      bundle.onResolve({ filter: /^undici$/ }, (args) => {
        if (args.kind === 'import-statement') return { path: used };
        return {
          errors: [{ text: `${args.kind} of undici: its names could not be checked against ${used}` }],
        };
      });
      bundle.onEnd((result) => {
        const named = `"${relative(bundle.initialOptions.absWorkingDir ?? process.cwd(), used)}"`;
        const missing = result.warnings.filter(
          (w) => w.id === 'import-is-undefined' && w.text.includes(named),
        );
        return { errors: missing.map(({ text, location }) => ({ text, location })) };
      });
      // Both builds of it (simd.js, no-simd.js) become one module whose setup() throws, each time it is called:
      // a module that threw while loading would be an empty object at the next require() of it.
      bundle.onResolve({ filter: /^\.\.\/milo\/(no-)?simd\.js$/ }, (args) =>
        args.importer.includes(`${sep}undici${sep}lib${sep}`)
          ? { path: 'milo', namespace: 'undici-left-out' }
          : undefined,
      );
      bundle.onLoad({ filter: /.*/, namespace: 'undici-left-out' }, () => ({
        contents: `module.exports.setup = () => {
          throw new Error("undici's Milo parser (UNDICI_USE_MILO, useMilo) is not in the agent's bundle");
        };`,
        loader: 'js',
      }));
    },
  };
}

/** What both bundles share: every dependency inside, minified but for names (stack traces name functions). */
const common = {
  bundle: true,
  platform: 'node',
  target: 'node22',
  outdir: join(agentDir, 'dist/bundle'),
  minifyWhitespace: true,
  minifySyntax: true,
  sourcemap: true,
  logLevel: 'warning',
  plugins: [sameVersionOnce()],
  // What each input adds to the bundle, for whoever looks for what to keep out next (esbuild's analyser reads it).
  metafile: Boolean(process.env.AGENT_BUNDLE_METAFILE),
};

// The agent is a CommonJS file (main.cjs). Node's ES module loader keeps the source it read, a 5 MB Buffer, alive
// until the first full collection, seconds into the start and past its busiest moment; the CommonJS loader lets go of
// it at once. Its modules' `import.meta.url` is the bundle's own URL, as it was in an ES module bundle.
const agent = await build({
  ...common,
  entryPoints: { main: join(agentDir, 'dist/main.js') },
  // The manifest parse thread imports nothing from undici.
  plugins: [undiciAsUsed(), ...common.plugins],
  format: 'cjs',
  outExtension: { '.js': '.cjs' },
  define: { 'import.meta.url': 'bundleUrl' },
  banner: { js: "const bundleUrl = require('node:url').pathToFileURL(__filename).href;" },
});
// The manifest parse thread (decision 019) stays an ES module beside it, as its loader in packages/oci names it.
const parseThread = await build({
  ...common,
  entryPoints: { 'manifest-parse-worker': join(repoDir, 'packages/oci/dist/manifest-parse-worker.js') },
  format: 'esm',
  // CommonJS dependencies call require(): an ES module has none of its own.
  banner: {
    js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);",
  },
});
if (process.env.AGENT_BUNDLE_METAFILE) {
  const inputs = { ...parseThread.metafile.inputs, ...agent.metafile.inputs };
  const outputs = { ...parseThread.metafile.outputs, ...agent.metafile.outputs };
  writeFileSync(process.env.AGENT_BUNDLE_METAFILE, JSON.stringify({ inputs, outputs }));
}
