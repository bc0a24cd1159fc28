// Every shipped binary starts here, before it imports anything else. A dependency made for a newer Node.js fails on
// an older one deep in its own code (undici on Node 20: "Cannot read properties of undefined (reading 'bind')"), and
// static imports are all evaluated before the importing file's first line runs; so a binary is a tiny file that
// checks the version here and only then imports its real entry point. Plain JavaScript that any Node.js can parse,
// with no dependency, so that the check itself runs on the versions it refuses.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The lowest Node.js version, as this package's engines field states it (`>=X.Y.Z`, the same in every package). */
export const REQUIRED_NODE = (() => {
  const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  const range = manifest.engines && manifest.engines.node;
  const match = /^>=\s*(\d+)\.(\d+)\.(\d+)$/.exec(String(range));
  if (!match)
    throw new Error(`@skr-watcher/api: engines.node must read >=X.Y.Z, got ${JSON.stringify(range)}`);
  return { range, version: match.slice(1, 4).join('.') };
})();

function parts(version) {
  return version
    .replace(/^v/, '')
    .split(/[.-]/)
    .slice(0, 3)
    .map((part) => Number.parseInt(part, 10) || 0);
}

/** Why `program` cannot run on Node.js `current` (one line), or undefined when it can. */
export function unsupportedNodeReason(program, current = process.versions.node) {
  const have = parts(current);
  const need = parts(REQUIRED_NODE.version);
  for (let i = 0; i < 3; i++) {
    if (have[i] > need[i]) return undefined;
    if (have[i] < need[i])
      return (
        `${program} needs Node.js ${REQUIRED_NODE.range} (engines); this is Node.js ${current}. ` +
        `Install Node.js ${REQUIRED_NODE.version} or newer and run it again.`
      );
  }
  return undefined;
}

/** Ends the process with exit code 1 and the one-line reason when this Node.js is too old for `program`. */
export function exitUnlessSupportedNode(program) {
  const reason = unsupportedNodeReason(program);
  if (reason === undefined) return;
  process.stderr.write(`${reason}\n`);
  process.exit(1);
}

/**
 * A binary's whole body: checks the Node.js version, then imports `entry` (a file URL of its built main). In a
 * checkout the bin files exist before `npm run build` has made dist/; a missing entry is explained, not thrown.
 */
export async function runBin(program, entry) {
  exitUnlessSupportedNode(program);
  if (!existsSync(entry)) {
    process.stderr.write(
      `${program} is not built: ${fileURLToPath(entry)} is missing. Run \`npm run build\` in the repository root.\n`,
    );
    process.exit(1);
  }
  await import(entry.href);
}
