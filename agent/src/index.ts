// Public surface of the KCP agent, for embedding and tests; the binary is main.ts (skr-agent).
export * from './config.js';
export * from './controller.js';
export * from './listener/index.js';
