export * from './common.js';
export * from './kyma.js';
export * from './catalog.js';
export * from './watcher.js';
export * from './mirrors.js';
export * from './parse.js';
export * from './crd.js';
export * from './crds.js';
