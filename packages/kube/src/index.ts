export * from './workqueue.js';
export * from './informer.js';
export * from './apply.js';
export * from './kubeconfig.js';
export * from './pooled-kubeconfig.js';
export * from './skr-clients.js';
export * from './leader-election.js';
export * from './pki-secrets.js';
