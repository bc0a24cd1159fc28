// `npm run test:unit` starts no server: no suite it runs (test/unit.mocharc.cjs), nor any file such a suite imports
// by a relative path, calls what starts a kube-apiserver, etcd, an OCI registry, Prometheus or a node. A suite that
// does belongs to `npm run test:api`. Read from the sources, as a reviewer would, not by running the suites.
import { readFile, glob } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

const root = fileURLToPath(new URL('../../', import.meta.url));
const require = createRequire(import.meta.url);
const unit = require('../unit.mocharc.cjs') as { spec: string[] };
const api = require('../api.mocharc.cjs') as { spec: string[]; ignore: string[] };

/** What starts a server or builds the binaries of one (testenv and the system harness of test/support). */
const STARTS_A_SERVER =
  /\b(startEnvironment|sharedEnvironment|ensureBinaries|startRegistry|ensureRegistryBinary|startPrometheus|runPromtool|ensurePrometheusBinaries|startNodes?|ensureNodeBinaries|startLocalSystem|startPodSystem)\s*\(/;

async function filesOf(patterns: string[]): Promise<string[]> {
  const files = new Set<string>();
  for (const pattern of patterns) for await (const file of glob(pattern, { cwd: root })) files.add(file);
  return [...files].sort();
}

/** The first file reached from `file` through relative imports that starts a server, with the call; or undefined. */
async function startsAServer(file: string, seen = new Set<string>()): Promise<string | undefined> {
  if (seen.has(file)) return undefined;
  seen.add(file);
  const text = await readFile(file, 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  const call = STARTS_A_SERVER.exec(text);
  if (call) return `${relative(root, file)}: ${call[1]}()`;
  for (const [, path] of text.matchAll(/from '(\.{1,2}\/[^']+)'/g)) {
    const found = await startsAServer(resolve(dirname(file), (path as string).replace(/\.js$/, '.ts')), seen);
    if (found) return found;
  }
  return undefined;
}

describe('npm run test:unit', function () {
  this.timeout(60_000);

  it('runs no suite that starts a kube-apiserver, etcd, registry, Prometheus or node, directly or through its imports', async () => {
    const suites = await filesOf(unit.spec);
    expect(suites.length).to.be.greaterThan(40);
    const offenders: string[] = [];
    for (const suite of suites) {
      const found = await startsAServer(join(root, suite));
      if (found) offenders.push(`${suite} (${found})`);
    }
    expect(offenders).to.deep.equal([]);
  });

  it('and test:api together run every suite of the workspaces, each once', async () => {
    const all = await filesOf(api.spec);
    const unitSuites = await filesOf(unit.spec);
    const ignored = new Set(await filesOf(api.ignore));
    expect(ignored).to.deep.equal(new Set(unitSuites));
    expect(unitSuites.every((suite) => all.includes(suite))).to.equal(true);
    // The check above is not vacuous: it finds the servers of a suite that starts them.
    expect(await startsAServer(join(root, 'packages/kube/test/apply.test.ts'))).to.match(/sharedEnvironment/);
  });
});
