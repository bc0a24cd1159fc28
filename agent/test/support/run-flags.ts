// `skr-agent run` flags for tests that start the agent's work in-process: no listener, loopback ports, one namespace.
import { DEFAULTS } from '@skr-watcher/api';
import type { RunFlags } from '../../src/config.js';

/** The flags of a test agent for `namespace`, with `overrides` on top (requeues, module installation, ...). */
export function testRunFlags(namespace: string, overrides: Partial<RunFlags> = {}): RunFlags {
  return {
    namespace,
    listener: false,
    listenAddress: '127.0.0.1:0',
    metricsAddress: '127.0.0.1:0',
    eventsAddress: '127.0.0.1:0',
    leaseName: 'unused',
    shardRing: 'unused',
    peerAddress: '127.0.0.1:0',
    leaseDuration: '15s',
    renewDeadline: '10s',
    retryPeriod: '2s',
    workers: '2',
    requeueReady: '500ms',
    requeueProcessing: '500ms',
    requeueWarning: '500ms',
    requeueError: '500ms',
    resyncInterval: '10m',
    driftRevertBackoff: '1s',
    fullReapplyInterval: '1h',
    logLevel: 'silent',
    skrWebhookImage: 'unused',
    skrWebhookNamespace: DEFAULTS.skrNamespace,
    watcherProbeAfter: '10m',
    watcherProbeTimeout: '1m',
    ...overrides,
  };
}
