export * from './workqueue.js';
