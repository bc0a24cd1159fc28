#!/usr/bin/env node
// skr-modules: publish module versions into an OCI registry and inspect what a registry holds.
import { runCli } from './program.js';

process.exitCode = await runCli(process.argv, { stdout: process.stdout, stderr: process.stderr });
