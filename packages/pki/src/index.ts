export * from './keys.js';
export * from './ca.js';
export * from './leaf.js';
