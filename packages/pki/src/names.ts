import { DEFAULTS } from '@skr-watcher/api';

/**
 * DNS SANs of an SKR's leaf: its `skr-domain`s, then the webhook's in-cluster Service names, through
 * which the SKR API server calls it.
 */
export function webhookDnsNames(domains: string[]): string[] {
  const service = `skr-webhook.${DEFAULTS.skrNamespace}.svc`;
  return [...new Set([...domains.map((d) => d.toLowerCase()), service, `${service}.cluster.local`])];
}
