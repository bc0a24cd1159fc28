// skr-agent takeover: adopts what upstream lifecycle-manager left in KCP and the SKRs (decision 028,
// docs/migration-from-lifecycle-manager.md). One JSON line per Kyma; exit 0 once every Kyma is taken over.
import { Command } from 'commander';
import { DEFAULTS } from '@skr-watcher/api';
import { createClusterClient, createSkrClients } from '@skr-watcher/kube';
import { createLogger } from '@skr-watcher/telemetry';
import { loadKcpKubeConfig, logLevelOption, parseDurationFlag, parseLogLevel } from '../config.js';
import {
  kymasToTakeOver,
  takeOverKyma,
  UPSTREAM_CERTIFICATE_NAMESPACE,
  type KymaTakeover,
} from '../takeover/index.js';

interface TakeoverFlags {
  kubeconfig?: string;
  namespace: string;
  kyma?: string[];
  skrWebhookNamespace: string;
  certificateNamespace: string;
  manifestsOnly?: boolean;
  handBack?: boolean;
  dryRun?: boolean;
  wait: string;
  logLevel: string;
}

async function takeOver(flags: TakeoverFlags): Promise<number> {
  const logger = createLogger('skr-agent', parseLogLevel(flags.logLevel));
  const waitMs = parseDurationFlag('--wait', flags.wait);
  const namespace = flags.namespace || DEFAULTS.kcpNamespace;
  const kcp = await createClusterClient(loadKcpKubeConfig(flags.kubeconfig), { name: 'kcp' });
  const skrClients = createSkrClients({ kcp, namespace, logger });
  const ctx = {
    kcp,
    skrClients,
    namespace,
    skrNamespace: flags.skrWebhookNamespace,
    certificateNamespace: flags.certificateNamespace,
    manifestsOnly: flags.manifestsOnly ?? false,
    handBack: flags.handBack ?? false,
    dryRun: flags.dryRun ?? false,
    logger,
  };
  const deadline = Date.now() + waitMs;
  try {
    let pending = await kymasToTakeOver(kcp, namespace, flags.kyma);
    for (;;) {
      const results: KymaTakeover[] = [];
      for (const kyma of pending) {
        try {
          results.push(await takeOverKyma(ctx, kyma));
        } catch (error) {
          // One SKR's failure is reported with it; the others go on.
          results.push({
            kyma: kyma.metadata.name,
            done: false,
            manifests: [],
            certificates: [],
            error: error instanceof Error ? error.message : String(error),
          });
        }
      }
      for (const result of results) process.stdout.write(`${JSON.stringify(result)}\n`);
      const left = results.filter((result) => !result.done).map((result) => result.kyma);
      pending = pending.filter((kyma) => left.includes(kyma.metadata.name));
      if (pending.length === 0 || flags.dryRun || Date.now() >= deadline) break;
      await new Promise((resolve) => setTimeout(resolve, Math.min(5_000, deadline - Date.now())));
    }
    return pending.length === 0 ? 0 : 1;
  } finally {
    await skrClients.close();
    await kcp.close();
  }
}

export function takeoverCommand(): Command {
  return new Command('takeover')
    .description(
      "take over Kymas lifecycle-manager manages: its Manifests adopted in place (SKR objects' field ownership, " +
        "finalizers), its SKR webhook and certificates replaced by the agent's; exits 0 once every Kyma is done",
    )
    .option('--kyma <name...>', 'only these KCP Kymas (default: every Kyma of the namespace)')
    .option('--kubeconfig <path>', 'KCP kubeconfig (default: $KUBECONFIG, ~/.kube/config, then in-cluster)')
    .option('--namespace <ns>', 'KCP namespace of the Kymas and Manifests', DEFAULTS.kcpNamespace)
    .option('--skr-webhook-namespace <ns>', 'namespace of the webhook in every SKR', DEFAULTS.skrNamespace)
    .option(
      '--certificate-namespace <ns>',
      "KCP namespace of lifecycle-manager's SKR certificates",
      UPSTREAM_CERTIFICATE_NAMESPACE,
    )
    .option(
      '--manifests-only',
      "adopt the Manifests only; leave lifecycle-manager's webhook and certificates",
    )
    .option(
      '--hand-back',
      "rollback (the agent stopped first): Manifests and their objects back to lifecycle-manager's finalizers and " +
        "field manager, the agent's webhook removed once lifecycle-manager's serves again",
    )
    .option('--dry-run', 'read only: print what would be done')
    .option('--wait <duration>', 'repeat for the Kymas not yet done, up to this long (0 = one round)', '0')
    .addOption(logLevelOption('warn'))
    .action(async (flags: TakeoverFlags) => {
      process.exitCode = await takeOver(flags);
    });
}
