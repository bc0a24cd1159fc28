// What to do next about one Kyma: the runbook in docs/runbooks whose alert its status would raise, and that
// runbook's first step made concrete for this Kyma. Read from what the agent records: the Kyma's state, its
// conditions (SKRConnected, SKRWebhook, Modules, SyncResourcesApplied), its modules and the webhook certificate.
import { CONDITION_TYPES, type KymaEvent, type KymaView } from './kyma-view.js';

export interface Advice {
  /** The runbook's name (its alert), e.g. SkrUnreachable; its file is docs/runbooks/<runbook>.md. */
  runbook: string;
  /** Why it applies to this Kyma, in one line. */
  because: string;
  /** The runbook's first step for this Kyma. */
  firstStep: string;
}

export const RUNBOOK_DIR = 'docs/runbooks';

/** Messages of a module that fails on the module registry (SkrModuleRegistryFailing's classes). */
const REGISTRY_FAILURE =
  /registry .* (is unreachable|did not answer|answered 5\d\d)|did not answer in time|answered 5\d\d/i;

/** A certificate with this little time left is past renewal (the agent renews with 30 days left). */
export const RENEWAL_OVERDUE_MS = 30 * 24 * 3600 * 1000;

export function adviceFor(view: KymaView, now: Date): Advice[] {
  const advice: Advice[] = [];
  const name = view.name;
  const ns = view.namespace;
  if (view.paused) {
    advice.push({
      runbook: 'none (paused by hand)',
      because: `reconciliation is paused${view.paused.by ? ` by ${view.paused.by}` : ''}${view.paused.reason ? `: ${view.paused.reason}` : ''}; the agent does not touch this Kyma`,
      firstStep: `when the work is done: kubectl skr resume ${name} -n ${ns} --reason "<why>"`,
    });
  }
  const connected = view.condition(CONDITION_TYPES.skrConnected);
  if (connected?.status === 'False') {
    const step =
      connected.reason === 'KubeconfigMissing' || connected.reason === 'KubeconfigInvalid'
        ? `the kubeconfig Secret: kubectl get secrets -n ${ns} -l operator.kyma-project.io/kyma-name=${name} (exactly one, with key config)`
        : connected.reason === 'SKRKymaFailed'
          ? 'the SKR answered but refused: the HTTP code is in the SKRConnected message above'
          : `the SKR gives no answer: sum by (code) (rate(skr_agent_kube_responses_total{cluster="skr"}[5m])) (401/403: rotate the kubeconfig; error: network, DNS, SKR down)`;
    advice.push({
      runbook: 'SkrUnreachable',
      because: `SKRConnected is False (${connected.reason ?? 'no reason'})`,
      firstStep: step,
    });
  }
  const modulesInError = view.modules.filter((module) => module.state === 'Error');
  const registryFailures = modulesInError.filter((module) => REGISTRY_FAILURE.test(module.reason ?? ''));
  if (registryFailures.length > 0) {
    advice.push({
      runbook: 'SkrModuleRegistryFailing',
      because: `module(s) ${registryFailures.map((m) => m.name).join(', ')} fail on the module registry`,
      firstStep:
        'confirm a registry outage: sum by (operation, code) (rate(skr_agent_oci_registry_requests_total[5m])); do not go to the SKR, nothing there is at fault',
    });
  }
  const otherModuleFailures = modulesInError.filter((module) => !registryFailures.includes(module));
  if (otherModuleFailures.length > 0) {
    advice.push({
      runbook: 'SkrModulesInError',
      because: `module(s) ${otherModuleFailures.map((m) => `${m.name} (${m.reason ?? 'no message'})`).join(', ')} in Error`,
      firstStep: `name the class from the message; the Manifest has more: kubectl get manifests -n ${ns} -l operator.kyma-project.io/kyma-name=${name} -o yaml`,
    });
  }
  const webhook = view.condition(CONDITION_TYPES.skrWebhook);
  if (webhook?.status === 'False') {
    const certificateTrouble = /certificate|CertificateAuthority/i.test(
      `${webhook.reason} ${webhook.message}`,
    );
    advice.push(
      certificateTrouble
        ? {
            runbook: 'SkrCertificateNotRenewed',
            because: `SKRWebhook is False (${webhook.reason ?? 'no reason'}): ${webhook.message ?? ''}`,
            firstStep:
              'a CA that expires too soon to renew from: rotate it (skr-certs rotate-ca, see SkrCertificateExpiring)',
          }
        : {
            runbook: 'SkrWebhookSilent',
            because: `SKRWebhook is False (${webhook.reason ?? 'no reason'})`,
            firstStep:
              'in the SKR: kubectl get deploy,pods -n kyma-system -l app.kubernetes.io/name=skr-webhook; its log says whether callbacks fail (TLS, DNS, the KCP address)',
          },
    );
  }
  const certificate = view.certificate;
  if (certificate?.kind === 'found' && certificate.notAfter.getTime() - now.getTime() < RENEWAL_OVERDUE_MS) {
    advice.push({
      runbook: 'SkrCertificateNotRenewed',
      because: `the webhook certificate expires at ${certificate.notAfter.toISOString()}, past its renewal point`,
      firstStep: `the reason is in the SKRWebhook condition and the Warning Events: kubectl get events -n ${ns} --field-selector involvedObject.name=${name}`,
    });
  }
  const sync = view.condition(CONDITION_TYPES.syncResourcesApplied);
  const explained = advice.some((item) => item.runbook !== 'none (paused by hand)');
  if (!explained && (view.state === 'Error' || sync?.status === 'False')) {
    advice.push({
      runbook: 'SkrKymasInError',
      because:
        sync?.status === 'False'
          ? `SyncResourcesApplied is False: ${sync.message ?? ''}`
          : `the Kyma is in Error${view.reason ? `: ${view.reason}` : ''}`,
      firstStep: `Warning Events repeat the reasons with a count: kubectl get events -n ${ns} --field-selector involvedObject.name=${name}`,
    });
  }
  return advice;
}

/** Everything about one Kyma on one screen: `kubectl skr explain` and the console's Kyma page. */
export interface Explanation {
  kyma: KymaView;
  events: KymaEvent[];
  advice: Advice[];
  /** Parts left out, each with why (a refusal, a failure). */
  notShown: string[];
}
