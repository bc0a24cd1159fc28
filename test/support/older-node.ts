// A Node.js binary older than the engines field, to run the shipped binaries on as a user with an old Node would:
// $OLDER_NODE, else the first `node` on the system PATH (outside node_modules) that is too old.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { REQUIRED_NODE, unsupportedNodeReason } from '@skr-watcher/api/node-version-guard';

/** Path and version of a Node.js that does not meet engines.node, or undefined when this machine has none. */
export function olderNode(): { path: string; version: string } | undefined {
  const candidates = [
    process.env['OLDER_NODE'],
    ...(process.env['PATH'] ?? '')
      .split(':')
      .filter((dir) => dir && !dir.includes('node_modules'))
      .map((dir) => join(dir, 'node')),
    '/usr/bin/node',
    '/usr/local/bin/node',
  ];
  for (const path of candidates) {
    if (!path || !existsSync(path)) continue;
    const answer = spawnSync(path, ['--version'], { encoding: 'utf8' });
    const version = answer.stdout?.trim().replace(/^v/, '');
    if (answer.status === 0 && version && unsupportedNodeReason('probe', version)) return { path, version };
  }
  return undefined;
}

export { REQUIRED_NODE };
