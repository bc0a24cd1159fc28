// skr-certs rotate-ca: run or resume the phased CA rotation (decision 004) against the KCP Secrets, with an audit
// trail as kubectl-skr's admin actions leave one: a JSON audit line on stderr for every attempt and, when a step was
// carried out, an Event on the CA Secret, both naming the caller as the API server knows them.
import { ApiException, AuthenticationV1Api, CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { CA_SECRET_NAME, type RsaKeyBits } from '@skr-watcher/pki';
import {
  KcpPkiSecrets,
  auditLine,
  callerIdentity,
  recordAuditEvent,
  type AuditOutcome,
} from '@skr-watcher/kube';
import { formatTable, type CommandResult } from '../output.js';
import { rotateCa, type RotationReport } from '../rotation.js';

/** Who wrote the audit lines and Events. */
export const ROTATION_AUDIT_COMPONENT = 'skr-certs';
/** The Event on the CA Secret when a rotate-ca run carried out at least one step. */
export const ROTATION_EVENT_REASON = 'CaRotationProgressed';

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
  /** Why: recorded in the audit line and the Event. */
  reason?: string;
}

export interface RotationAuditIo {
  /** Where the audit line goes (stderr). */
  audit: (line: string) => void;
  now: () => Date;
}

function stepsDetail(report: RotationReport): string {
  const steps = report.steps.map((step) => `${step.step}: ${step.detail}`).join('; ');
  return `${steps || 'no step'}; phase ${report.state.phase}${report.dryRun ? ' (dry run, nothing written)' : ''}`;
}

export async function rotateCaCommand(
  opts: RotateCaCommandOptions,
  progress: (message: string) => void,
  io: RotationAuditIo,
): Promise<CommandResult> {
  const secrets = await KcpPkiSecrets.fromKubeconfig(opts.kubeconfig, opts.namespace);
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(opts.kubeconfig);
  const startedAt = io.now();
  const reason = opts.reason ?? '';
  let user = 'unknown';
  const audit = (outcome: AuditOutcome, detail: string) =>
    io.audit(
      auditLine(ROTATION_AUDIT_COMPONENT, {
        time: startedAt.toISOString(),
        user,
        action: 'rotate-ca',
        scope: `${opts.namespace}/${CA_SECRET_NAME} (the KCP CA: every SKR's webhook certificate)`,
        reason,
        outcome,
        detail,
      }),
    );
  let report: RotationReport;
  try {
    user = (await callerIdentity(kubeConfig.makeApiClient(AuthenticationV1Api))).username;
    report = await runRotation(secrets, opts, progress);
  } catch (error) {
    const refused = error instanceof ApiException && error.code === 403;
    audit(refused ? 'refused' : 'failed', error instanceof Error ? error.message : String(error));
    throw error;
  }
  let detail = stepsDetail(report);
  const changed = !report.dryRun && report.steps.length > 0;
  if (changed) {
    try {
      await recordAuditEvent(kubeConfig.makeApiClient(CoreV1Api), {
        namespace: opts.namespace,
        involvedObject: { apiVersion: 'v1', kind: 'Secret', name: CA_SECRET_NAME },
        reason: ROTATION_EVENT_REASON,
        action: 'rotate-ca',
        message: `rotate-ca by ${user}${reason ? ` (${reason})` : ''}: ${detail}`,
        component: ROTATION_AUDIT_COMPONENT,
        user,
        now: io.now(),
      });
    } catch (error) {
      // The rotation is done; a missing Event must not hide that, the audit line says it instead.
      detail += `; Event not recorded: ${error instanceof Error ? error.message : String(error)}`;
    }
  }
  audit(changed ? 'done' : 'unchanged', detail);
  return renderReport(report);
}

async function runRotation(
  secrets: KcpPkiSecrets,
  opts: RotateCaCommandOptions,
  progress: (message: string) => void,
): Promise<RotationReport> {
  return rotateCa(secrets, {
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
}

function renderReport(report: RotationReport): CommandResult {
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
