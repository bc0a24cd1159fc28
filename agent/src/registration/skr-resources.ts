// What the agent installs in an SKR besides the webhook configuration: TLS Secret, the webhook's identity
// (ServiceAccount, and a ClusterRole to read its own configuration) and, in-cluster, its Deployment, Service and
// NetworkPolicy.
import type { KubernetesObject } from '@kubernetes/client-node';
import { DEFAULTS, LABELS, MANAGED_BY } from '@skr-watcher/api';
import { SKR_WEBHOOK_NAME } from './webhook-configuration.js';

/** Secret in the SKR holding the webhook's certificate; mounted by the Deployment. */
export const SKR_WEBHOOK_TLS_SECRET = 'skr-webhook-tls';
export const WEBHOOK_PORT = 8443;
export const METRICS_PORT = 2112;

export interface SkrWebhookMaterial {
  namespace?: string;
  caBundlePem: string;
  certPem: string;
  keyPem: string;
}

const labels = { [LABELS.managedBy]: MANAGED_BY, 'app.kubernetes.io/name': SKR_WEBHOOK_NAME };

export function tlsSecretFor(
  material: SkrWebhookMaterial,
): KubernetesObject & { data: Record<string, string> } {
  const b64 = (text: string) => Buffer.from(text).toString('base64');
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: SKR_WEBHOOK_TLS_SECRET,
      namespace: material.namespace ?? DEFAULTS.skrNamespace,
      labels,
    },
    type: 'Opaque',
    data: {
      'ca.crt': b64(material.caBundlePem),
      'tls.crt': b64(material.certPem),
      'tls.key': b64(material.keyPem),
    },
  } as KubernetesObject & { data: Record<string, string> };
}

export interface InClusterOptions {
  namespace?: string;
  image: string;
  /** host:port of the KCP listener as seen from the SKR. */
  kcpAddress: string;
  /** CN the webhook requires of the KCP server's certificate; unset: the webhook's default (the listener's). */
  kcpServerCn?: string;
  /** Changes with the certificate, so the Deployment rolls only when it must (the webhook also hot-reloads). */
  certificateChecksum: string;
}

/** A manifest: typed envelope, free-form body. */
export type Manifest = KubernetesObject & Record<string, unknown>;

/**
 * The webhook's ServiceAccount, allowed to get, list and watch its own ValidatingWebhookConfiguration and nothing
 * else (it watches it to notice it deleted or re-pointed). Installed in URL mode too, where a
 * webhook outside the SKR may use a token of this account.
 */
export function webhookIdentityFor(namespace: string = DEFAULTS.skrNamespace): Manifest[] {
  const name = SKR_WEBHOOK_NAME;
  return [
    {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name, namespace, labels },
      automountServiceAccountToken: false,
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name, labels },
      rules: [
        {
          apiGroups: ['admissionregistration.k8s.io'],
          resources: ['validatingwebhookconfigurations'],
          // list and watch by name: the webhook asks with fieldSelector metadata.name.
          resourceNames: [SKR_WEBHOOK_NAME],
          verbs: ['get', 'list', 'watch'],
        },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name, labels },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
      subjects: [{ kind: 'ServiceAccount', name, namespace }],
    },
  ];
}

/** Deployment, Service and NetworkPolicy of the in-cluster webhook. */
export function inClusterResourcesFor(options: InClusterOptions): Manifest[] {
  const namespace = options.namespace ?? DEFAULTS.skrNamespace;
  const meta = { name: SKR_WEBHOOK_NAME, namespace, labels };
  const selector = { 'app.kubernetes.io/name': SKR_WEBHOOK_NAME };
  const certDir = '/etc/skr-webhook/tls';
  return [
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: meta,
      spec: {
        replicas: 1,
        selector: { matchLabels: selector },
        template: {
          metadata: {
            labels: { ...labels },
            annotations: { 'skr-watcher/certificate-checksum': options.certificateChecksum },
          },
          spec: {
            serviceAccountName: SKR_WEBHOOK_NAME,
            // Only this Pod gets the account's token: it watches its own webhook configuration.
            automountServiceAccountToken: true,
            securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
            containers: [
              {
                name: 'webhook',
                image: options.image,
                // The image's entrypoint is the agent; the webhook is a command of its own on the image's PATH.
                command: ['skr-webhook'],
                env: [
                  { name: 'WEBHOOK_PORT', value: String(WEBHOOK_PORT) },
                  { name: 'METRICS_PORT', value: String(METRICS_PORT) },
                  { name: 'TLS_CERT', value: `${certDir}/tls.crt` },
                  { name: 'TLS_KEY', value: `${certDir}/tls.key` },
                  { name: 'CA_CERT', value: `${certDir}/ca.crt` },
                  { name: 'KCP_ADDR', value: options.kcpAddress },
                  { name: 'KCP_CONTRACT', value: 'v2' },
                  { name: 'WATCH_CONFIGURATION', value: SKR_WEBHOOK_NAME },
                  ...(options.kcpServerCn ? [{ name: 'KCP_SERVER_CN', value: options.kcpServerCn }] : []),
                ],
                ports: [
                  { name: 'https', containerPort: WEBHOOK_PORT },
                  { name: 'metrics', containerPort: METRICS_PORT },
                ],
                readinessProbe: { httpGet: { path: '/readyz', port: 'metrics' } },
                // Node loads its modules slowly on a busy node (25 s seen on 2 loaded cores): the liveness
                // probe (3 misses, 10 s apart) would kill the webhook before it ever listened. Up to 2 min to start.
                startupProbe: {
                  httpGet: { path: '/healthz', port: 'metrics' },
                  periodSeconds: 2,
                  failureThreshold: 60,
                },
                livenessProbe: { httpGet: { path: '/healthz', port: 'metrics' } },
                // Measured (npm run bench:webhook-memory, decision 015): ~110 MiB at rest, peaks 172-201 MiB under
                // 8 concurrent 4 MiB reviews with the body budget (225-238 MiB without it).
                resources: { requests: { cpu: '10m', memory: '128Mi' }, limits: { memory: '256Mi' } },
                securityContext: {
                  allowPrivilegeEscalation: false,
                  readOnlyRootFilesystem: true,
                  capabilities: { drop: ['ALL'] },
                },
                volumeMounts: [{ name: 'tls', mountPath: certDir, readOnly: true }],
              },
            ],
            volumes: [{ name: 'tls', secret: { secretName: SKR_WEBHOOK_TLS_SECRET } }],
          },
        },
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: meta,
      spec: { selector, ports: [{ name: 'https', port: 443, targetPort: 'https' }] },
    },
    {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: meta,
      spec: {
        podSelector: { matchLabels: selector },
        policyTypes: ['Ingress', 'Egress'],
        // The API server calls in on the webhook port; metrics are scraped in-cluster.
        ingress: [{ ports: [{ port: WEBHOOK_PORT }, { port: METRICS_PORT }] }],
        // Out: the KCP listener (any address, the port of KCP_ADDR), the SKR API server for the watch of the
        // webhook's configuration (policies see the endpoint's port after the Service: 443 or 6443), and DNS.
        egress: [
          { ports: [{ port: Number(options.kcpAddress.split(':').pop() ?? 443) }] },
          { ports: [{ port: 443 }, { port: 6443 }] },
          {
            ports: [
              { port: 53, protocol: 'UDP' },
              { port: 53, protocol: 'TCP' },
            ],
          },
        ],
      },
    },
  ];
}
