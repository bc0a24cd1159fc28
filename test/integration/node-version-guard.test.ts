// The Node.js version check every binary starts with (packages/api/node-version-guard.js): on a Node.js older than
// the engines field a user gets one line naming the version needed and exit code 1, never a dependency's stack trace;
// on a supported one the binaries run as before. The binaries are run as npm links them, on a real older Node.js.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { REQUIRED_NODE, unsupportedNodeReason } from '@skr-watcher/api/node-version-guard';
import { olderNode } from '../support/older-node.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

interface Manifest {
  engines?: { node?: string };
  workspaces?: string[];
  bin?: Record<string, string>;
}

const manifestOf = (dir: string) =>
  JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8')) as Manifest;

/** Every binary a workspace package declares, with the file npm links for it. */
const BINARIES = (manifestOf('.').workspaces ?? []).flatMap((dir) =>
  Object.entries(manifestOf(dir).bin ?? {}).map(([name, file]) => ({ name, path: join(root, dir, file) })),
);

describe('Node.js version check of the binaries', function () {
  this.timeout(120_000);

  it('names the version needed in one line below engines.node, and lets that version and newer ones through', () => {
    expect(REQUIRED_NODE.range).to.equal(manifestOf('.').engines?.node);
    for (const old of ['20.20.2', 'v21.99.99', '22.18.9', '22.0.0', '18.0.0']) {
      const reason = unsupportedNodeReason('skr-modules', old);
      expect(reason, old).to.be.a('string');
      expect(reason).to.contain(`skr-modules needs Node.js ${REQUIRED_NODE.range}`).and.contain(old);
      expect(reason).not.to.contain('\n');
    }
    for (const fine of [REQUIRED_NODE.version, '22.23.3', '23.0.0', '24.1.0', process.versions.node])
      expect(unsupportedNodeReason('skr-modules', fine), fine).to.equal(undefined);
  });

  it('covers the binaries of the agent, webhook, certificates, modules CLI, testenv and the sample manager', () => {
    expect(BINARIES.map((b) => b.name)).to.include.members([
      'skr-agent',
      'skr-webhook',
      'skr-certs',
      'skr-modules',
      'skr-testenv',
      'sample-manager',
    ]);
  });

  it('every binary on an older Node.js exits 1 with that one line on stderr and no stack trace', function () {
    const older = olderNode();
    if (!older) this.skip();
    for (const binary of BINARIES) {
      const run = spawnSync(older.path, [binary.path, '--help'], { encoding: 'utf8', cwd: root });
      expect(run.status, `${binary.name}: ${run.stderr}`).to.equal(1);
      expect(run.stderr, binary.name).to.equal(`${unsupportedNodeReason(binary.name, older.version)}\n`);
      expect(run.stdout, binary.name).to.equal('');
    }
  });

  it('a program importing @skr-watcher/module-manager exits 1 with the one line before a dependency runs', function () {
    const older = olderNode();
    if (!older) this.skip();
    const run = spawnSync(
      older.path,
      ['--input-type=module', '-e', "import '@skr-watcher/module-manager'; console.log('imported')"],
      { encoding: 'utf8', cwd: root },
    );
    expect(run.status, run.stderr).to.equal(1);
    expect(run.stderr).to.equal(`${unsupportedNodeReason('@skr-watcher/module-manager', older.version)}\n`);
    expect(run.stdout).to.equal('');
  });

  it('every binary still runs on this Node.js: --help exits 0', () => {
    for (const binary of BINARIES) {
      const run = spawnSync(process.execPath, [binary.path, '--help'], { encoding: 'utf8', cwd: root });
      expect(run.status, `${binary.name}: ${run.stderr}`).to.equal(0);
      expect(run.stdout, binary.name).to.contain('Usage:');
    }
  });
});
