#!/usr/bin/env node
// skr-testenv as npm links it: this file exists at install time, dist/ only once built (`npm ci` builds).
import { runBuilt } from '../../../bin/run-built.js';

await runBuilt('skr-testenv', new URL('../dist/cli.js', import.meta.url));
