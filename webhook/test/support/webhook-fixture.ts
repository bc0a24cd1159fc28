// Starts an in-process webhook with real TLS files and a real mTLS KCP stand-in, and talks to it.
import { request } from 'node:https';
import { request as httpRequest } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { silentLogger } from '@skr-watcher/telemetry';
import { startWebhook, type RunningWebhook, type WebhookOptions } from '../../src/index.js';
import { SecretVolume, secretFiles, testPki, type CertificateAndKey, type TestPki } from './certs.js';
import { TestKcpListener } from './kcp-listener.js';

export interface WebhookFixture {
  pki: TestPki;
  leaf: CertificateAndKey;
  volume: SecretVolume;
  kcp: TestKcpListener;
  webhook: RunningWebhook;
  stop(): Promise<void>;
}

export async function startWebhookFixture(
  options: Partial<WebhookOptions> = {},
  pki = testPki(),
): Promise<WebhookFixture> {
  const leaf = pki.leaf('skr-test-runtime');
  const kcpLeaf = pki.listener();
  const kcp = new TestKcpListener(kcpLeaf, pki.ca.certPem);
  await kcp.start();
  const volume = await SecretVolume.create(secretFiles(leaf, pki.ca.certPem));
  const webhook = await startWebhook({
    host: '127.0.0.1',
    webhookPort: 0,
    metricsPort: 0,
    tlsCertFile: volume.path('tls.crt'),
    tlsKeyFile: volume.path('tls.key'),
    caCertFile: volume.path('ca.crt'),
    kcpAddr: kcp.addr,
    backoffInitialMs: 50,
    backoffMaxMs: 500,
    shutdownDrainMs: 2_000,
    logger: silentLogger(),
    ...options,
  });
  return {
    pki,
    leaf,
    volume,
    kcp,
    webhook,
    async stop() {
      await webhook.close();
      await kcp.stop();
      await volume.remove();
    },
  };
}

export interface Answer {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
  /** Serial number of the certificate the server presented. */
  serverSerial: string;
}

/** One HTTPS request to the webhook, trusting only the test CA. */
export function callWebhook(
  port: number,
  caPem: string,
  init: { method?: string; path?: string; body?: Buffer | string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: init.method ?? 'POST',
        path: init.path ?? '/validate/lifecycle-manager',
        ca: caPem,
        agent: false,
        headers: { 'content-type': 'application/json', ...init.headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        const serverSerial = (res.socket as TLSSocket).getPeerCertificate().serialNumber ?? '';
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString('utf8'),
            headers: res.headers,
            serverSerial,
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(init.body);
  });
}

/** GET on the plain-HTTP metrics port. */
export function getMetricsPort(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    httpRequest({ host: '127.0.0.1', port, path }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
      );
    })
      .on('error', reject)
      .end();
  });
}

/** Value of one sample in Prometheus text format, e.g. `skr_webhook_events_dropped_total{reason="max_age"}`. */
export function metricValue(text: string, sample: string): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith(sample + ' ')) return Number(line.slice(sample.length + 1));
  }
  return undefined;
}

/** A Sample review of the given operation, as the API server would send it. */
export function sampleReview(
  uid: string,
  operation: 'CREATE' | 'UPDATE' | 'DELETE',
  name: string,
  spec: Record<string, unknown> = { replicas: 1 },
  oldSpec: Record<string, unknown> = { replicas: 0 },
): Record<string, unknown> {
  const object = {
    apiVersion: 'operator.kyma-project.io/v1alpha1',
    kind: 'Sample',
    metadata: { name, namespace: 'kyma-system' },
  };
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid,
      kind: { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: 'Sample' },
      resource: { group: 'operator.kyma-project.io', version: 'v1alpha1', resource: 'samples' },
      name,
      namespace: 'kyma-system',
      operation,
      object: operation === 'DELETE' ? null : { ...object, spec },
      oldObject: operation === 'CREATE' ? null : { ...object, spec: oldSpec },
    },
  };
}
