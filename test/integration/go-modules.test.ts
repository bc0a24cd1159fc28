// Every Go module of the repository (api/go, its module manager helper, examples/go-manager; testenv's own Go
// helpers excepted) is gofmt-clean and passes `go vet` and `go test`, the envtest suites against the project's own
// kube-apiserver and etcd (KUBEBUILDER_ASSETS at testenv's cache: nothing is downloaded). The samples the Go types
// round-trip are the ones the CRD agreement test draws.
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ensureBinaries } from '@skr-watcher/testenv';
import { expect } from 'chai';
import { CRD_SAMPLES_FILE, crdSamplesText } from '../support/crd-samples.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const run = promisify(execFile);
/** Go ships outside PATH on some machines; a `go` on PATH wins. */
const GO =
  existsSync('/usr/local/go/bin/go') && !process.env['GO']
    ? '/usr/local/go/bin/go'
    : (process.env['GO'] ?? 'go');
/** Folders that hold no module of the repository's own (testenv's helpers are built by testenv). */
const SKIPPED = new Set(['node_modules', 'dist', '.git', 'packages/testenv/go']);

/** Directories of the repository's go.mod files, relative to the root. */
function goModules(dir = ''): string[] {
  return readdirSync(join(root, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (SKIPPED.has(name) || SKIPPED.has(path) || name.startsWith('.')) return [];
    if (name === 'go.mod') return [dir];
    return statSync(join(root, path)).isDirectory() ? goModules(path) : [];
  });
}

describe('Go modules', function () {
  // A cold build of controller-runtime and envtest takes tens of minutes on two busy cores.
  this.timeout(60 * 60_000);
  const modules = goModules();
  let assets: string;

  before(async () => {
    assets = dirname((await ensureBinaries()).kubeApiserver);
  });

  it('are api/go, its module manager helper and examples/go-manager', () => {
    expect(modules.sort()).to.deep.equal(['api/go', 'api/go/modulemanager', 'examples/go-manager']);
  });

  it('api/go/testdata/crd-samples.json holds what the CRD agreement test draws (rewrite it with test/support/crd-samples.ts)', () => {
    expect(readFileSync(CRD_SAMPLES_FILE, 'utf8'), relative(root, CRD_SAMPLES_FILE)).to.equal(
      crdSamplesText(),
    );
  });

  for (const module of modules) {
    it(`${module}: gofmt-clean, go vet and go test pass (envtest with the project's binaries)`, async () => {
      const cwd = join(root, module);
      const env = { ...process.env, KUBEBUILDER_ASSETS: assets, GOTOOLCHAIN: 'local' };
      const { stdout: unformatted } = await run(
        dirname(GO) === '.' ? 'gofmt' : join(dirname(GO), 'gofmt'),
        ['-l', '.'],
        { cwd },
      );
      expect(unformatted, `${module}: files gofmt would change`).to.equal('');
      const go = async (...args: string[]) => {
        try {
          return await run(GO, args, { cwd, env, maxBuffer: 64 * 1024 * 1024 });
        } catch (error) {
          const { stdout, stderr } = error as { stdout?: string; stderr?: string };
          throw new Error(`${module}: go ${args.join(' ')} failed\n${stdout ?? ''}${stderr ?? ''}`, {
            cause: error,
          });
        }
      };
      await go('vet', './...');
      await go('test', '-count=1', './...');
    });
  }
});
