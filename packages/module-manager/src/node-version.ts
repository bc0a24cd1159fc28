// The kit's first import (index.ts): a manager built on it, started on a too old Node.js, exits with one line that
// names the version it needs, before @kubernetes/client-node and undici are evaluated and fail with their own trace.
import { exitUnlessSupportedNode } from '@skr-watcher/api/node-version-guard';

exitUnlessSupportedNode('@skr-watcher/module-manager');
