#!/usr/bin/env node
// skr-webhook as npm links it. Nothing but the Node.js version check is imported before the built entry point: a
// dependency evaluated on a too old Node.js would fail with its own stack trace instead of a one-line reason.
import { runBin } from '@skr-watcher/api/node-version-guard';

await runBin('skr-webhook', new URL('../dist/main.js', import.meta.url));
