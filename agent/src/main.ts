#!/usr/bin/env node
// skr-agent: the KCP agent. `run` serves the callback listener and reconciles Kymas; `reconcile --once` runs
// one reconciliation and exits; `events` tails accepted callbacks; `takeover` adopts what lifecycle-manager left.
// Each command lives in commands/.
import './v8-settings.js';
import { Command } from 'commander';
import { versionLine } from '@skr-watcher/api';
import { eventsCommand } from './commands/events.js';
import { reconcileCommand } from './commands/reconcile.js';
import { runCommand } from './commands/run.js';
import { takeoverCommand } from './commands/takeover.js';
import { ConfigError } from './config.js';

const cli = new Command('skr-agent')
  .description(
    'KCP agent of skr-watcher: callback listener and lifecycle reconciliation of Kymas and their SKRs',
  )
  .version(versionLine('skr-agent'), '-V, --version', 'print the version and exit')
  .showHelpAfterError()
  .addCommand(runCommand())
  .addCommand(reconcileCommand())
  .addCommand(eventsCommand())
  .addCommand(takeoverCommand());

cli.parseAsync(process.argv).catch((error: unknown) => {
  if (error instanceof ConfigError) {
    process.stderr.write(
      `skr-agent: ${error.message}${error.cause ? `: ${String((error.cause as Error).message ?? error.cause)}` : ''}\n`,
    );
    process.exit(2);
  }
  process.stderr.write(`skr-agent: ${error instanceof Error ? error.message : String(error)}\n`);
  if (error instanceof Error && error.cause)
    process.stderr.write(`  cause: ${String((error.cause as Error).message ?? error.cause)}\n`);
  process.exit(1);
});
