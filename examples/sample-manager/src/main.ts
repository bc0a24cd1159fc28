#!/usr/bin/env node
// sample-manager: the sample module's manager. Watches the sample module's ModuleConfigs in KCP and keeps one
// SyncResource per ModuleConfig with the ConfigMap renderSample makes of it. The whole program:
import { runModuleManager } from '@skr-watcher/module-manager';
import { SAMPLE_MANAGER, renderSample } from './render.js';

await runModuleManager({ ...SAMPLE_MANAGER, render: renderSample });
