export * from './constants.js';
export * from './resources.js';
export * from './events.js';
export * from './admission.js';
export * from './timing.js';
export * from './depth.js';
export * from './duration.js';
export * from './build-info.js';
