// A module manager as a process: flags, JSON logs, /metrics /healthz /readyz, graceful shutdown on SIGTERM.
import { KubeConfig } from '@kubernetes/client-node';
import { Command, InvalidArgumentError, Option } from 'commander';
import { DEFAULTS, TIMER_MAX_MS, parseDuration } from '@skr-watcher/api';
import { createLogger, createRegistry, createShutdown, startHealthServer } from '@skr-watcher/telemetry';
import { createModuleManager } from './manager.js';
import type { RenderFunction } from './render.js';

export interface ModuleManagerCliOptions {
  /** Binary and manager name (field manager, condition prefix); a DNS label. */
  name: string;
  version: string;
  module: string;
  description?: string;
  render: RenderFunction;
  /** Arguments to parse; default process.argv. */
  argv?: string[];
}

interface Flags {
  kubeconfig?: string;
  namespace: string;
  metricsAddress: { host: string; port: number };
  workers: number;
  resync: number;
}

function address(raw: string): { host: string; port: number } {
  const colon = raw.lastIndexOf(':');
  const port = Number(raw.slice(colon + 1));
  if (colon < 0 || !/^\d{1,5}$/.test(raw.slice(colon + 1)) || port > 65_535)
    throw new InvalidArgumentError(
      `expected [host]:port (e.g. :8080 or 127.0.0.1:8080), got ${JSON.stringify(raw)}`,
    );
  const host = raw.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
  return { host: host || '0.0.0.0', port };
}

function positive(raw: string): number {
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1 || value > 256)
    throw new InvalidArgumentError(`expected a whole number from 1 to 256, got ${JSON.stringify(raw)}`);
  return value;
}

function duration(raw: string): number {
  try {
    return parseDuration(raw.trim(), TIMER_MAX_MS);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

/**
 * Runs a module manager until SIGTERM or SIGINT: `--kubeconfig` (else $KUBECONFIG, else in-cluster), `--namespace`,
 * `--metrics-address`, `--workers`, `--resync`; `--help` and `--version`. Exits 2 on bad flags, 1 when it cannot start.
 */
export async function runModuleManager(options: ModuleManagerCliOptions): Promise<void> {
  const command = new Command(options.name)
    .description(
      options.description ??
        `Module manager of the ${options.module} module: renders each of its ModuleConfigs into a SyncResource`,
    )
    .version(options.version, '--version')
    .option(
      '--kubeconfig <path>',
      'kubeconfig of the KCP (default: $KUBECONFIG, else the in-cluster account)',
    )
    .option(
      '--namespace <name>',
      'KCP namespace of the ModuleConfigs and SyncResources',
      DEFAULTS.kcpNamespace,
    )
    .addOption(
      new Option('--metrics-address <[host]:port>', '/metrics, /healthz and /readyz (plain HTTP)')
        .argParser(address)
        .default(address(':8080'), ':8080'),
    )
    .addOption(new Option('--workers <n>', 'ModuleConfigs reconciled at once').argParser(positive).default(4))
    .addOption(
      new Option('--resync <duration>', 'relist ModuleConfigs and SyncResources this often')
        .argParser(duration)
        .default(600_000, '10m'),
    )
    .showHelpAfterError()
    .exitOverride((error) => process.exit(error.exitCode === 0 ? 0 : 2));
  command.parse(options.argv ?? process.argv);
  const flags = command.opts<Flags>();

  const logger = createLogger(options.name);
  const kubeConfig = new KubeConfig();
  try {
    if (flags.kubeconfig) kubeConfig.loadFromFile(flags.kubeconfig);
    else kubeConfig.loadFromDefault();
  } catch (error) {
    process.stderr.write(`${options.name}: cannot load the kubeconfig: ${(error as Error).message}\n`);
    process.exit(2);
  }
  const registry = createRegistry();
  const manager = createModuleManager({
    name: options.name,
    module: options.module,
    render: options.render,
    kubeConfig,
    namespace: flags.namespace,
    workers: flags.workers,
    resyncMs: flags.resync,
    logger,
    registry,
  });
  const shutdown = createShutdown({ logger });
  const health = await startHealthServer({
    host: flags.metricsAddress.host,
    port: flags.metricsAddress.port,
    registry,
    healthy: () => !shutdown.stopping,
    ready: () => manager.ready() && !shutdown.stopping,
  });
  shutdown.add('metrics server', () => health.close());
  shutdown.add('module manager', () => manager.stop());
  logger.info(
    { version: options.version, namespace: flags.namespace, metricsPort: health.port },
    `${options.name} starting`,
  );
  try {
    await manager.start();
  } catch (error) {
    logger.error({ err: error }, 'could not start');
    await shutdown.run('start failed');
    process.exit(1);
  }
}
