// skr-certs rotate-ca: run or resume the phased CA rotation (decision 004) against the KCP Secrets.
import type { RsaKeyBits } from '@skr-watcher/pki';
import { KcpPkiSecrets } from '@skr-watcher/kube';
import { formatTable, type CommandResult } from '../output.js';
import { rotateCa } from '../rotation.js';

export interface RotateCaCommandOptions {
  kubeconfig: string;
  namespace: string;
  gracePeriod: number;
  propagationDelay: number;
  dryRun?: boolean;
  new?: boolean;
  wait?: boolean;
  steps?: number;
  commonName: string;
  keyBits: string;
  validityDays?: number;
}

export async function rotateCaCommand(
  opts: RotateCaCommandOptions,
  progress: (message: string) => void,
): Promise<CommandResult> {
  const report = await rotateCa(await KcpPkiSecrets.fromKubeconfig(opts.kubeconfig, opts.namespace), {
    gracePeriodMs: opts.gracePeriod,
    propagationMs: opts.propagationDelay,
    startNew: opts.new === true,
    dryRun: opts.dryRun === true,
    maxSteps: opts.steps ?? Number.POSITIVE_INFINITY,
    wait: opts.wait === true,
    caCommonName: opts.commonName,
    caKeyBits: Number(opts.keyBits) as RsaKeyBits,
    caValidityDays: opts.validityDays,
    now: () => new Date(),
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    progress,
  });
  const rows = report.steps.map((s) => [s.at.toISOString(), s.step, s.phase, s.detail]);
  const lines = [
    ...(rows.length === 0 ? [report.waitingUntil ? 'nothing to do yet' : 'nothing to do'] : []),
    `phase: ${report.state.phase}${report.dryRun ? ' (dry run, nothing written)' : ''}`,
    ...(report.waitingUntil
      ? [
          `${report.waitingFor === 'propagation' ? 'propagation delay' : 'grace period'} until: ${report.waitingUntil.toISOString()}`,
        ]
      : []),
  ];
  return {
    data: report,
    table:
      rows.length === 0
        ? { lines }
        : {
            lines: [
              ...formatTable(['TIME', 'STEP', 'PHASE', 'DETAIL'], rows).trimEnd().split('\n'),
              ...lines,
            ],
          },
  };
}
