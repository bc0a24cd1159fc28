#!/usr/bin/env node
// skr-certs: certificate CLI of skr-watcher.
import { runCli } from './program.js';

process.exitCode = await runCli(process.argv, {
  stdout: process.stdout,
  stderr: process.stderr,
  now: () => new Date(),
});
