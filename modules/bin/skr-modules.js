#!/usr/bin/env node
// skr-modules as npm links it: this file exists at install time, dist/ only once built (`npm ci` builds).
import { runBuilt } from '../../bin/run-built.js';

await runBuilt('skr-modules', new URL('../dist/main.js', import.meta.url));
