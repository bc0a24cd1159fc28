// Certificate expiry for Prometheus (decision 023): seconds until the signing CA, the listener's serving certificate
// and the soonest SKR leaf this replica knows expire, and how many of those leaves are past their renewal time
// (RENEW_BEFORE_MS before expiry) without having been renewed. Read at scrape time from what the process holds:
// the CA Secret's watch, the listener's files as last loaded, the leaves the registration pass read or wrote.
import { describeCertificate, RENEW_BEFORE_MS } from '@skr-watcher/pki';
import { scrapeTimeGauge, type Registry } from '@skr-watcher/telemetry';

/** The certificates with an expiry series; a fixed set, so the label is bounded. */
export type CertificateRole = 'ca' | 'listener' | 'skr-leaf-soonest';

export interface CertificateSources {
  /** The PEM of the certificate in this role now; undefined when this replica does not hold one. */
  pem?: Partial<Record<Exclude<CertificateRole, 'skr-leaf-soonest'>, () => string | undefined>>;
  /** Expiry of every SKR leaf this replica knows. */
  leaves?: () => Iterable<Date>;
}

const sourcesOf = new WeakMap<Registry, CertificateSources[]>();

/** notAfter of a PEM, parsed once per distinct PEM text. */
const parsedNotAfter = new Map<string, Date>();
function notAfterOf(pem: string): Date | undefined {
  let date = parsedNotAfter.get(pem);
  if (!date) {
    try {
      date = describeCertificate(pem).notAfter;
    } catch {
      return undefined;
    }
    if (parsedNotAfter.size > 16) parsedNotAfter.clear();
    parsedNotAfter.set(pem, date);
  }
  return date;
}

/** Adds `sources` to the registry's certificate gauges (several parts of one process each bring theirs). */
export function reportCertificates(
  registry: Registry,
  sources: CertificateSources,
  clock: () => number = Date.now,
): () => void {
  let all = sourcesOf.get(registry);
  if (!all) {
    all = [];
    sourcesOf.set(registry, all);
  }
  all.push(sources);
  const current = all;
  scrapeTimeGauge(registry, {
    name: 'skr_agent_certificate_expiry_seconds',
    help: 'Seconds until expiry (negative: expired) of the signing CA (certificate="ca"), the listener serving certificate ("listener") and the soonest-expiring SKR webhook leaf this replica knows ("skr-leaf-soonest").',
    labelNames: ['certificate'],
    collect() {
      this.reset();
      const now = clock();
      const soonest = new Map<CertificateRole, number>();
      const note = (role: CertificateRole, date: Date | undefined) => {
        if (!date) return;
        const seconds = (date.getTime() - now) / 1000;
        soonest.set(role, Math.min(soonest.get(role) ?? Infinity, seconds));
      };
      for (const source of current) {
        for (const [role, pem] of Object.entries(source.pem ?? {})) {
          const text = pem?.();
          if (text) note(role as CertificateRole, notAfterOf(text));
        }
        for (const date of source.leaves?.() ?? []) note('skr-leaf-soonest', date);
      }
      for (const [certificate, seconds] of soonest) this.set({ certificate }, seconds);
    },
  });
  scrapeTimeGauge(registry, {
    name: 'skr_agent_certificates_past_renewal',
    help: 'SKR webhook leaves this replica knows that are within their renewal window (30 days or less left) and not renewed yet; a pass renews them, so a value that stays means renewal fails.',
    collect() {
      const now = clock();
      let count = 0;
      for (const source of current) {
        for (const date of source.leaves?.() ?? []) if (date.getTime() - now <= RENEW_BEFORE_MS) count++;
      }
      this.set(count);
    },
  });
  return () => {
    const index = current.indexOf(sources);
    if (index >= 0) current.splice(index, 1);
  };
}
