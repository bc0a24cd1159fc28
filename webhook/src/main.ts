#!/usr/bin/env node
// skr-webhook: the SKR admission webhook binary (configuration: --help).
import { createLogger, createShutdown } from '@skr-watcher/telemetry';
import { webhookCommand } from './config.js';
import { startWebhook } from './index.js';

const logger = createLogger('skr-webhook');

const command = webhookCommand(async (config) => {
  const shutdown = createShutdown({ logger, timeoutMs: config.shutdownDrainMs + 15_000 });
  const webhook = await startWebhook({ ...config, logger });
  shutdown.add('webhook', () => webhook.close());
});

command.parseAsync(process.argv).catch((error: unknown) => {
  logger.fatal({ err: error }, 'skr-webhook failed to start');
  process.exitCode = 1;
});
