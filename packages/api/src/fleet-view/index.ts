export * from './kyma-view.js';
export * from './advice.js';
