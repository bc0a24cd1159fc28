#!/usr/bin/env node
// kubectl-skr as npm links it: this file exists at install time, dist/ only once built (`npm ci` builds).
import { runBuilt } from '../../bin/run-built.js';

await runBuilt('kubectl-skr', new URL('../dist/main.js', import.meta.url));
