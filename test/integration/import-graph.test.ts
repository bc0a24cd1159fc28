// The import graph of the apps and packages has no cycles (decision 018), and no package imports an app:
// dependency-cruiser with the repository's rules (.dependency-cruiser.mjs), the same command `npm run lint` runs, so
// CI catches a break too.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';

const root = fileURLToPath(new URL('../../', import.meta.url));
const depcruise = join(root, 'node_modules', '.bin', 'depcruise');
const config = join(root, '.dependency-cruiser.mjs');
/** What `npm run lint:cycles` cruises. */
const SOURCES = ['packages/*/src', 'agent/src', 'webhook/src', 'certs/src', 'modules/src', 'examples/*/src'];

async function cruise(cwd: string, paths: string[]): Promise<{ ok: boolean; output: string }> {
  try {
    const { stdout } = await promisify(execFile)(depcruise, ['--config', config, ...paths], {
      cwd,
      maxBuffer: 16 * 1024 * 1024,
    });
    return { ok: true, output: stdout };
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    return { ok: false, output: `${stdout ?? ''}${stderr ?? ''}` };
  }
}

describe('import graph', function () {
  this.timeout(180_000);

  it('has no cycles and no package importing an app in packages/, the apps and examples/ (type-only imports included)', async () => {
    const { ok, output } = await cruise(root, ['--output-type', 'json', ...SOURCES]);
    expect(ok, output).to.equal(true);
    const { summary } = JSON.parse(output) as { summary: { totalCruised: number; violations: unknown[] } };
    expect(summary.violations).to.deep.equal([]);
    // Every workspace's sources were read, not an empty match.
    expect(summary.totalCruised).to.be.greaterThan(100);
  });

  it('the rule catches a cycle made of type-only imports', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'import-graph-'));
    try {
      await writeFile(join(dir, 'a.ts'), "import type { B } from './b.js';\nexport interface A { b?: B }\n");
      await writeFile(join(dir, 'b.ts'), "import type { A } from './a.js';\nexport interface B { a?: A }\n");
      const { ok, output } = await cruise(dir, ['--output-type', 'err', '.']);
      expect(ok).to.equal(false);
      expect(output).to.contain('no-circular');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('the rule catches a package that imports an app, by workspace name or by path', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'import-graph-'));
    try {
      const file = async (path: string, text: string) => {
        await mkdir(join(dir, path, '..'), { recursive: true });
        await writeFile(join(dir, path), text);
      };
      await file(
        'webhook/package.json',
        JSON.stringify({ name: 'w', exports: { '.': { source: './src/index.ts' } } }),
      );
      await file('webhook/src/index.ts', 'export interface W { w?: string }\n');
      await file('agent/src/index.ts', 'export interface A { a?: string }\n');
      await mkdir(join(dir, 'node_modules', '@skr-watcher'), { recursive: true });
      await symlink('../../webhook', join(dir, 'node_modules', '@skr-watcher', 'webhook'));
      await file(
        'packages/p/src/index.ts',
        "import type { W } from '@skr-watcher/webhook';\n" +
          "import type { A } from '../../../agent/src/index.js';\n" +
          'export type P = [W, A];\n',
      );
      const { ok, output } = await cruise(dir, ['--output-type', 'err', 'packages']);
      expect(ok).to.equal(false);
      expect(output).to.contain('packages-not-on-apps: packages/p/src/index.ts → webhook/src/index.ts');
      expect(output).to.contain('packages-not-on-apps: packages/p/src/index.ts → agent/src/index.ts');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
