export * from './logger.js';
export * from './metrics.js';
export * from './health-server.js';
export * from './shutdown.js';
export * from './connections.js';
export * from './http-app.js';
export * from './build-info.js';
