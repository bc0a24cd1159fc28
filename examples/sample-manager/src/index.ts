export { renderSample, SAMPLE_CONFIG_MAP, SAMPLE_MANAGER } from './render.js';
