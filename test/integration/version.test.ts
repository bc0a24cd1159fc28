// `--version` on every binary and the version they print (decision 023): the project's one version (held equal to
// every workspace's package.json here) with the git revision of this checkout and the Node.js version.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { VERSION } from '@skr-watcher/api';

const root = new URL('../../', import.meta.url);
const BINARIES: [string, string][] = [
  ['skr-agent', 'agent/dist/main.js'],
  ['skr-webhook', 'webhook/dist/main.js'],
  ['skr-certs', 'certs/dist/main.js'],
  ['skr-testenv', 'packages/testenv/dist/cli.js'],
];

describe('--version on every binary', function () {
  this.timeout(60_000);
  const revision = execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], {
    cwd: root,
    encoding: 'utf8',
  }).trim();

  for (const [binary, entry] of BINARIES) {
    it(`${binary} --version prints its version, revision and Node.js version and exits 0`, () => {
      const out = execFileSync(process.execPath, [new URL(entry, root).pathname, '--version'], {
        encoding: 'utf8',
        env: { ...process.env, SKR_WATCHER_REVISION: '' },
      });
      expect(out.trim()).to.equal(`${binary} ${VERSION} (revision ${revision}, node ${process.version})`);
    });
  }

  it('the version is the one every workspace package.json carries', () => {
    const workspaces = [
      '.',
      'agent',
      'webhook',
      'certs',
      'packages/api',
      'packages/kube',
      'packages/pki',
      'packages/telemetry',
      'packages/testenv',
    ];
    for (const dir of workspaces) {
      const manifest = JSON.parse(readFileSync(new URL(`${dir}/package.json`, root), 'utf8')) as {
        version: string;
      };
      expect(manifest.version, dir).to.equal(VERSION);
    }
  });
});
