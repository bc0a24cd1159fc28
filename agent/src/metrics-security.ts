// `--metrics-secure`: /metrics over HTTPS, answered only to a bearer token whose user may GET /metrics
// (TokenReview + SubjectAccessReview against the KCP, as kubebuilder projects do; decision 023). The serving
// certificate is --metrics-tls-cert/--metrics-tls-key, else one made at start and signed by itself (a scraper then
// skips verification, as the shipped ServiceMonitor does; the token, not the certificate, is what is checked).
import { readFile } from 'node:fs/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import { kubernetesMetricsAuthorizer } from '@skr-watcher/kube';
import { createCa } from '@skr-watcher/pki';
import type { HealthServerOptions } from '@skr-watcher/telemetry';
import { ConfigError } from './config.js';

export interface MetricsSecurityFlags {
  metricsSecure?: boolean;
  metricsTlsCert?: string;
  metricsTlsKey?: string;
}

export async function metricsSecurity(
  flags: MetricsSecurityFlags,
  kcp: KubeConfig,
): Promise<HealthServerOptions['secure']> {
  if (!flags.metricsSecure) {
    if (flags.metricsTlsCert || flags.metricsTlsKey)
      throw new ConfigError('--metrics-tls-cert and --metrics-tls-key need --metrics-secure');
    return undefined;
  }
  if (Boolean(flags.metricsTlsCert) !== Boolean(flags.metricsTlsKey))
    throw new ConfigError('--metrics-tls-cert and --metrics-tls-key go together');
  let material: { certPem: string; keyPem: string };
  if (flags.metricsTlsCert && flags.metricsTlsKey) {
    const read = (flag: string, file: string) =>
      readFile(file, 'utf8').catch((cause: unknown) => {
        throw new ConfigError(`${flag} ${file}: cannot read it`, { cause });
      });
    material = {
      certPem: await read('--metrics-tls-cert', flags.metricsTlsCert),
      keyPem: await read('--metrics-tls-key', flags.metricsTlsKey),
    };
  } else {
    material = createCa({ commonName: 'skr-agent-metrics', keyBits: 2048, validityDays: 365 });
  }
  const authorizer = kubernetesMetricsAuthorizer(kcp);
  return { ...material, authorize: (token, path) => authorizer.check(token, path) };
}
