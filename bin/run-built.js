// The workspaces' bin files (agent/bin/skr-agent.js, …) are committed because npm links bins at install
// time, before the build has made dist/; each runs its built entry point through here.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** Imports `entry` (a dist/ file URL), or explains how to build it and exits 1. */
export async function runBuilt(name, entry) {
  if (!existsSync(entry)) {
    process.stderr.write(
      `${name} is not built: ${fileURLToPath(entry)} is missing. Run \`npm run build\` in the repository root.\n`,
    );
    process.exit(1);
  }
  await import(entry.href);
}
