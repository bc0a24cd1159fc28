// Names and keys of the KCP Secrets that hold the PKI; the I/O lives in the apps.

/** The signing CA: `tls.crt`, `tls.key`; during a rotation also the pending and the previous CA. */
export const CA_SECRET_NAME = 'skr-watcher-ca';
/** The trust bundle the listener verifies client certificates against: `ca-bundle.crt`. */
export const CA_BUNDLE_SECRET_NAME = 'skr-watcher-ca-bundle';
export const WEBHOOK_TLS_SECRET_SUFFIX = '-webhook-tls';
/**
 * The KCP listener's serving certificate (`ca.crt`, `tls.crt`, `tls.key`). SKR webhooks verify it against their
 * `ca.crt`, so a CA rotation re-issues it with the SKR leaves, before the old CA leaves the bundle.
 */
export const LISTENER_TLS_SECRET_NAME = 'skr-agent-listener-tls';

export const SECRET_KEYS = {
  cert: 'tls.crt',
  key: 'tls.key',
  ca: 'ca.crt',
  bundle: 'ca-bundle.crt',
  /** The CA a rotation is introducing, until signing switches to it. */
  pendingCert: 'pending-tls.crt',
  pendingKey: 'pending-tls.key',
  /** The CA a rotation replaced, until it leaves the bundle (certificate only; its key is discarded). */
  previousCert: 'previous-tls.crt',
} as const;

/** One Secret per SKR: `ca.crt` (the bundle at issue time), `tls.crt`, `tls.key`. */
export function webhookTlsSecretName(kymaName: string): string {
  return `${kymaName}${WEBHOOK_TLS_SECRET_SUFFIX}`;
}

/** The Kyma name of a `<kyma>-webhook-tls` Secret, or undefined for any other Secret. */
export function kymaNameOfWebhookTlsSecret(secretName: string): string | undefined {
  if (
    !secretName.endsWith(WEBHOOK_TLS_SECRET_SUFFIX) ||
    secretName.length === WEBHOOK_TLS_SECRET_SUFFIX.length
  ) {
    return undefined;
  }
  return secretName.slice(0, -WEBHOOK_TLS_SECRET_SUFFIX.length);
}
