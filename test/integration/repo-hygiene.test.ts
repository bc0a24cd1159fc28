// The tracked files speak of the product, not of how it was built: no line names a numbered work period
// ("session 19"), who ran the work, an issue number of this project, or a document the repository does not hold
// (an outside design document, notes, a folder beside the checkout). `git grep` over what is tracked, so an
// untracked scratch file does not fail it and a new tracked line does.
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';

const root = fileURLToPath(new URL('../../', import.meta.url));
/** This file, which must spell the patterns out. */
const SELF = 'test/integration/repo-hygiene.test.ts';
/** Extended regular expression (git grep -E) of the lines that narrate the development instead of the product. */
const PATTERN = [
  '[Ss]essions? [0-9]+',
  'coordinator',
  'DESIGN',
  '[Ii]ssue [0-9]+',
  'notes/',
  '\\.\\./shared',
].join('|');

/** The matching lines (`path:line:text`) of the tracked files in `cwd`, less `exclude`. */
async function offending(cwd: string, exclude: string[] = []): Promise<string[]> {
  const args = ['grep', '-n', '-I', '-E', PATTERN, '--', '.', ...exclude.map((path) => `:(exclude)${path}`)];
  try {
    const { stdout } = await promisify(execFile)('git', args, { cwd, maxBuffer: 64 * 1024 * 1024 });
    return stdout.split('\n').filter((line) => line !== '');
  } catch (error) {
    // git grep exits 1 when nothing matched; anything else is a failure to run it.
    if ((error as { code?: unknown }).code === 1) return [];
    throw error;
  }
}

describe('repository hygiene', function () {
  this.timeout(60_000);

  it('no tracked line narrates the development, cites an issue number or a document the repository lacks', async () => {
    const lines = await offending(root, [SELF]);
    expect(lines, `${lines.length} lines:\n${lines.join('\n')}`).to.deep.equal([]);
  });

  it('the check finds such lines and lets the genuine words through', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'repo-hygiene-'));
    try {
      const git = (...args: string[]) => promisify(execFile)('git', args, { cwd: dir });
      await git('init', '--quiet');
      const bad = [
        '// Fixed in session 19: finalizers were lost.',
        '// Measured in sessions 13-15.',
        "// The coordinator's run.",
        '// The bar of DESIGN 5.',
        '// Retry-After honoured (issue 26 item 2).',
        '// Issue 30: drift.',
        '// See notes/module-installation.md.',
        '// As ../shared says.',
      ];
      const good = [
        '// The second connection resumed the TLS session of the first.',
        '// The design of the ring: buckets, not runtime-ids.',
        '// It issues 60-day leaves; see https://github.com/kyma-project/lifecycle-manager/issues/1234.',
        '// Decision 021 says why.',
      ];
      await writeFile(join(dir, 'bad.ts'), `${bad.join('\n')}\n`);
      await writeFile(join(dir, 'good.ts'), `${good.join('\n')}\n`);
      await writeFile(join(dir, 'untracked.ts'), '// session 1\n');
      await git('add', 'bad.ts', 'good.ts');
      const lines = await offending(dir);
      expect(lines).to.deep.equal(bad.map((text, i) => `bad.ts:${i + 1}:${text}`));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
