// An API server's own request counters: its /metrics read with a kubeconfig's client certificate, as Prometheus
// scrapes it. What a test or benchmark counts here is what the server served, whoever sent it.
import { request } from 'node:https';
import type { AgentOptions } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import { parseMetrics, type Samples } from './prometheus-text.js';

/** Every sample of the API server's /metrics whose series starts with one of `prefixes`. */
export async function apiserverMetrics(
  kubeConfig: KubeConfig,
  prefixes: string[] = ['apiserver_request_total{'],
): Promise<Samples> {
  const server = kubeConfig.getCurrentCluster()?.server;
  if (!server) throw new Error('kubeconfig has no current cluster');
  const tls: AgentOptions = {};
  await kubeConfig.applyToHTTPSOptions(tls);
  const text = await new Promise<string>((resolve, reject) => {
    const req = request(
      new URL('/metrics', server),
      { ca: tls.ca, cert: tls.cert, key: tls.key, agent: false },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () =>
          res.statusCode === 200 ? resolve(body) : reject(new Error(`/metrics: HTTP ${res.statusCode}`)),
        );
      },
    );
    req.on('error', reject);
    req.end();
  });
  const all = parseMetrics(text);
  return new Map([...all].filter(([key]) => prefixes.some((prefix) => key.startsWith(prefix))));
}

/** A label's value in a series key such as `apiserver_request_total{verb="GET",resource="kymas"}`. */
export const labelOf = (key: string, name: string): string =>
  new RegExp(`[{,]${name}="([^"]*)"`).exec(key)?.[1] ?? '';

/** How much each series grew between two reads, for the series `keep` selects. */
export function growth(before: Samples, after: Samples, keep: (key: string) => boolean): Map<string, number> {
  const grown = new Map<string, number>();
  for (const [key, value] of after) {
    if (!keep(key)) continue;
    const delta = value - (before.get(key) ?? 0);
    if (delta > 0) grown.set(key, delta);
  }
  return grown;
}
