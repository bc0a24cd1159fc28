// skr-agent reconcile --once: one reconciliation of one Kyma without servers; exit 0 only if it ends Ready.
import { Command } from 'commander';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { DEFAULTS, GROUP, KINDS, type Kyma } from '@skr-watcher/api';
import { createLogger } from '@skr-watcher/telemetry';
import { loadKcpKubeConfig, logLevelOption, parseDurationFlag, parseLogLevel } from '../config.js';
import { createManager } from '../manager/index.js';

async function reconcileOnce(flags: {
  kubeconfig?: string;
  namespace: string;
  kyma: string;
  once?: boolean;
  wait: string;
  logLevel: string;
}): Promise<number> {
  const logger = createLogger('skr-agent', parseLogLevel(flags.logLevel));
  const waitMs = parseDurationFlag('--wait', flags.wait);
  const kcp = loadKcpKubeConfig(flags.kubeconfig);
  const namespace = flags.namespace || DEFAULTS.kcpNamespace;
  const key = `${namespace}/${flags.kyma}`;
  const manager = createManager({ kcp, namespace, logger });
  const api = kcp.makeApiClient(CustomObjectsApi);
  const deadline = Date.now() + waitMs;
  let state = 'Unknown';
  try {
    for (;;) {
      let requeueAfterMs: number | undefined;
      try {
        requeueAfterMs = (await manager.reconciler.reconcile(key)).requeueAfterMs;
      } catch {
        // The reconciler has logged the failure; the Kyma's state below decides the exit code.
      }
      const kyma = (await api.getNamespacedCustomObject({
        group: GROUP,
        version: KINDS.kyma.version,
        namespace,
        plural: KINDS.kyma.plural,
        name: flags.kyma,
      })) as Kyma;
      state = kyma.status?.state ?? 'Unknown';
      const left = deadline - Date.now();
      if (state === 'Ready' || left <= 0) {
        process.stdout.write(
          `${JSON.stringify({ kyma: key, state, modules: (kyma.status?.modules ?? []).map((m) => ({ name: m.name, state: m.state, message: m.message })) })}\n`,
        );
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(requeueAfterMs ?? 1_000, 2_000, left)));
    }
  } finally {
    await manager.close();
  }
  return state === 'Ready' ? 0 : 1;
}

export function reconcileCommand(): Command {
  return new Command('reconcile')
    .description('reconcile one Kyma without servers; exits 0 only if the Kyma ends Ready')
    .requiredOption('--kyma <name>', 'name of the KCP Kyma')
    .option('--once', 'run the reconciliation once (the only mode; kept for clarity in scripts)')
    .option('--kubeconfig <path>', 'KCP kubeconfig (default: $KUBECONFIG, ~/.kube/config, then in-cluster)')
    .option('--namespace <ns>', 'KCP namespace of the Kyma', DEFAULTS.kcpNamespace)
    .option('--wait <duration>', 'repeat while the Kyma is not Ready, up to this long (0 = one pass)', '0')
    .addOption(logLevelOption('warn'))
    .action(async (flags: Parameters<typeof reconcileOnce>[0]) => {
      process.exitCode = await reconcileOnce(flags);
    });
}
