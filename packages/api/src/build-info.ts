// What a running binary is, for `--version` on every command line and `<component>_build_info` on every /metrics
// (decision 023). The version is the project's (one for every package; a test holds it equal to package.json); the
// revision comes from $SKR_WATCHER_REVISION (an image build sets it), else from git when run from a checkout, else
// `unknown`. The one place in this package that asks the system something: once, lazily, when a version is shown.
import { spawnSync } from 'node:child_process';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The project's version; package.json of every workspace carries the same (test/version.test.ts). */
export const VERSION = '0.1.0';

export interface BuildInfo {
  version: string;
  revision: string;
  node: string;
}

let cached: BuildInfo | undefined;

function gitRevision(): string | undefined {
  try {
    const here = dirname(fileURLToPath(import.meta.url));
    const git = spawnSync('git', ['rev-parse', '--short=12', 'HEAD'], {
      cwd: here,
      encoding: 'utf8',
      timeout: 2_000,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const revision = git.status === 0 ? git.stdout.trim() : '';
    return /^[0-9a-f]{7,40}$/.test(revision) ? revision : undefined;
  } catch {
    return undefined;
  }
}

export function buildInfo(): BuildInfo {
  cached ??= {
    version: VERSION,
    revision: process.env['SKR_WATCHER_REVISION']?.trim() || gitRevision() || 'unknown',
    node: process.version,
  };
  return cached;
}

/** The line `--version` prints: `skr-agent 0.1.0 (revision 1a2b3c4d5e6f, node v22.22.0)`. */
export function versionLine(binary: string): string {
  const info = buildInfo();
  return `${binary} ${info.version} (revision ${info.revision}, node ${info.node})`;
}
