#!/usr/bin/env node
// kubectl-skr: the kubectl plugin of skr-watcher for on-call engineers (`kubectl skr …` once it is on PATH).
import { setTimeout as sleep } from 'node:timers/promises';
import { runPlugin } from './program.js';

/** Taking over SIGINT and SIGTERM ends the watch cleanly (exit 0) instead of killing it mid-write. */
const interrupted = () =>
  new Promise<void>((resolve) => {
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });

process.exitCode = await runPlugin(process.argv, {
  stdout: process.stdout,
  stderr: process.stderr,
  now: () => new Date(),
  sleep: (ms) => sleep(ms),
  interrupted,
});
