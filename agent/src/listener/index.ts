// The authenticated callback listener of the KCP agent (decision 005).
//
// Contract for the agent (main.ts / controller wire it in):
//
//   const listener = await startListener({
//     port, host?,                                   // port 0 = any free port; read listener.port
//     mode: { kind: 'direct', certPem, keyPem, caBundlePem }   // HTTPS + client certificates (default)
//         | { kind: 'gateway', trustedProxies: ['10.0.0.0/8'] },// plain HTTP behind a mesh gateway
//     resolveKyma: (runtimeId) => ({ namespace, name }) | undefined,  // sync, from an informer cache
//     enqueue: (kymaKey /* "namespace/name" */) => queue.add(kymaKey),
//     onAccepted?: (event: AcceptedEvent) => void,     // live event stream; exceptions are logged only
//     logger?, registry?,                              // from @skr-watcher/telemetry
//     coalesceWindowMs?,                               // additive: hold a key this long before enqueue (0)
//     shutdownGraceMs?,                                // additive: close() grace for requests in flight (5 s)
//     callbackBudget?,                                 // per runtime-id token bucket (CALLBACK_BUDGET) | false
//   });
//   listener.updateTls({ certPem, keyPem, caBundlePem });  // CA rotation: new connections use it at once
//   await listener.close();                                // on SIGTERM, before the queue stops
//
// Answers (JSON `{code, reason, message}`): 200 accepted; 400 bad JSON or fields; 401 no, untrusted or
// CN-less client certificate (direct), or untrusted proxy / missing or malformed XFCC (gateway); 403
// runtime-id without a Kyma, or a v1 owner naming another Kyma; 404 unknown path; 405 not POST; 413 body
// over 16 KiB (checked while streaming); 415 not application/json; 429 + Retry-After: the runtime-id is over its
// callback budget; 503 + Retry-After: the Kyma's owner did not take it (when to send again: a NotTakenYetError's
// seconds, else 1); 500 only if resolveKyma/enqueue throw.
// Identity = subject CN of the verified client certificate = the `kyma-project.io/runtime-id` label.
// Metrics: skr_listener_requests_total{code}, skr_listener_request_duration_seconds{code},
// skr_listener_events_accepted_total{contract}, skr_listener_enqueued_total, skr_listener_open_connections,
// skr_listener_tls_updates_total.
export type { AcceptedEvent, Listener, ListenerMode, ListenerOptions, TlsMaterial } from './contract.js';
export { NotTakenYetError } from './answers.js';
export { startListener } from './server.js';
export { ReconcileWakes } from './reconcile-wakes.js';
export { parseXfcc, commonNamesOf, runtimeIdFromXfcc, type XfccElement } from './xfcc.js';
export { trustedProxies, type TrustedProxies } from './trusted-proxies.js';
