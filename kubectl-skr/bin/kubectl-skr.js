#!/usr/bin/env node
// kubectl-skr as npm links it. Nothing but the Node.js version check is imported before the built entry point: a
// dependency evaluated on a too old Node.js would fail with its own stack trace instead of a one-line reason.
import { runBin } from '@skr-watcher/api/node-version-guard';

await runBin('kubectl-skr', new URL('../dist/main.js', import.meta.url));
