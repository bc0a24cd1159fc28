// The SKR's ValidatingWebhookConfiguration, built from the Watcher CRs and the enabled modules' Module CR types.
import type {
  V1ValidatingWebhook,
  V1ValidatingWebhookConfiguration,
  AdmissionregistrationV1WebhookClientConfig,
} from '@kubernetes/client-node';
import {
  DEFAULTS,
  DRIFT,
  GROUP,
  LABELS,
  MANAGED_BY,
  managerOf,
  type GroupVersionResource,
  type Watcher,
  byCodeUnit,
} from '@skr-watcher/api';

/** Name of the webhook configuration, Service, Secret and Deployment in every SKR. */
export const SKR_WEBHOOK_NAME = 'skr-webhook';
/** Upper bound of timeoutSeconds: the webhook answers in milliseconds, and the API server must never wait long. */
export const WEBHOOK_TIMEOUT_SECONDS = 10;

/** Where the API server reaches the webhook: its in-cluster Service, or a URL (local SKRs). */
export type WebhookTarget =
  { kind: 'service'; namespace: string; name: string; port: number } | { kind: 'url'; baseUrl: string };

export interface WebhookConfigurationInput {
  watchers: Watcher[];
  /** Resources of the Module CRs of the modules enabled in this SKR (resolved through the SKR's discovery). */
  moduleResources: GroupVersionResource[];
  caBundlePem: string;
  target: WebhookTarget;
  timeoutSeconds?: number;
  /**
   * Also watch writes of the objects modules installed (label `managed-by: kyma`), so drift is put back at once;
   * on when the agent installs modules.
   */
  installedObjects?: boolean;
}

function clientConfig(target: WebhookTarget, manager: string, caBundlePem: string) {
  const path = `/validate/${manager}`;
  const caBundle = Buffer.from(caBundlePem).toString('base64');
  const config: AdmissionregistrationV1WebhookClientConfig =
    target.kind === 'service'
      ? { service: { namespace: target.namespace, name: target.name, port: target.port, path }, caBundle }
      : { url: `${target.baseUrl.replace(/\/$/, '')}${path}`, caBundle };
  return config;
}

/** Webhook names must be fully qualified (three DNS labels); the Watcher name stays recognisable in it. */
export function webhookNameFor(watcherName: string): string {
  return `${watcherName}.${GROUP}`;
}

/** The webhook that carries the Module CR rules of the enabled modules. */
export const MODULES_WEBHOOK_NAME = `modules.${SKR_WEBHOOK_NAME}.${GROUP}`;
/** The webhook that sees writes of every object a module installed: one label selector, no list of kinds. */
export const INSTALLED_OBJECTS_WEBHOOK_NAME = `installed-objects.${SKR_WEBHOOK_NAME}.${GROUP}`;

export function webhookConfigurationFor(input: WebhookConfigurationInput): V1ValidatingWebhookConfiguration {
  const timeoutSeconds = Math.min(input.timeoutSeconds ?? 5, WEBHOOK_TIMEOUT_SECONDS);
  const common = {
    admissionReviewVersions: ['v1'],
    sideEffects: 'NoneOnDryRun',
    // The webhook never denies; if it is down, writes must still go through.
    failurePolicy: 'Ignore',
    matchPolicy: 'Equivalent',
    timeoutSeconds,
  } satisfies Partial<V1ValidatingWebhook>;

  const watcherHooks: V1ValidatingWebhook[] = [...input.watchers]
    .sort((a, b) => byCodeUnit(a.metadata.name, b.metadata.name))
    .map((watcher) => {
      const { group, version, resource } = watcher.spec.resourceToWatch;
      return {
        ...common,
        name: webhookNameFor(watcher.metadata.name),
        clientConfig: clientConfig(input.target, managerOf(watcher), input.caBundlePem),
        objectSelector: { matchLabels: { ...(watcher.spec.labelsToWatch ?? {}) } },
        rules: [
          {
            apiGroups: [group],
            apiVersions: [version],
            resources: [watcher.spec.field === 'status' ? `${resource}/status` : resource],
            operations: ['CREATE', 'UPDATE', 'DELETE'],
            scope: 'Namespaced',
          },
        ],
      };
    });

  const moduleResources = dedupe(input.moduleResources);
  const moduleHooks: V1ValidatingWebhook[] =
    moduleResources.length === 0
      ? []
      : [
          {
            ...common,
            name: MODULES_WEBHOOK_NAME,
            clientConfig: clientConfig(input.target, DEFAULTS.manager, input.caBundlePem),
            rules: moduleResources.map((gvr) => ({
              apiGroups: [gvr.group],
              apiVersions: [gvr.version],
              resources: [gvr.resource],
              operations: ['CREATE', 'UPDATE', 'DELETE'],
              scope: 'Namespaced',
            })),
          },
        ];

  // Updates and deletions only: the agent creates these objects itself; `*` (no subresources) leaves status
  // writes out. The webhook drops the agent's own applies and controllers' churn before any callback.
  const installedHooks: V1ValidatingWebhook[] = input.installedObjects
    ? [
        {
          ...common,
          name: INSTALLED_OBJECTS_WEBHOOK_NAME,
          clientConfig: clientConfig(input.target, DEFAULTS.manager, input.caBundlePem),
          objectSelector: { matchLabels: { [LABELS.managedBy]: DRIFT.managedByValue } },
          rules: [
            {
              apiGroups: ['*'],
              apiVersions: ['*'],
              resources: ['*'],
              operations: ['UPDATE', 'DELETE'],
              scope: '*',
            },
          ],
        },
      ]
    : [];

  const webhooks = [...watcherHooks, ...moduleHooks, ...installedHooks];
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingWebhookConfiguration',
    metadata: { name: SKR_WEBHOOK_NAME, labels: { [LABELS.managedBy]: MANAGED_BY } },
    // No hooks: no field. An applied `webhooks: []` is written again on every apply (a new resourceVersion each
    // time, seen on kube-apiserver 1.35); leaving the field out removes hooks we applied before all the same.
    ...(webhooks.length > 0 ? { webhooks } : {}),
  };
}

function dedupe(resources: GroupVersionResource[]): GroupVersionResource[] {
  const seen = new Map<string, GroupVersionResource>();
  for (const gvr of resources) seen.set(`${gvr.group}/${gvr.version}/${gvr.resource}`, gvr);
  return [...seen.values()].sort((a, b) =>
    byCodeUnit(`${a.group}/${a.resource}`, `${b.group}/${b.resource}`),
  );
}
