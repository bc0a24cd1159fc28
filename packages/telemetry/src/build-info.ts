// `<component>_build_info{version,revision,node} 1` on every /metrics (decision 023); callers pass
// @skr-watcher/api's buildInfo(), what `--version` prints.
import { Gauge, registeredMetric, type Registry } from './metrics.js';

/** `<prefix>_build_info{version,revision,node} 1` in `registry`; prefix e.g. `skr_agent`. */
export function registerBuildInfo(
  registry: Registry,
  prefix: string,
  info: { version: string; revision: string; node: string },
): void {
  const name = `${prefix}_build_info`;
  registeredMetric(registry, name, () => {
    const gauge = new Gauge({
      name,
      help: 'Always 1; the labels say which build runs (version, git revision, Node.js version).',
      labelNames: ['version', 'revision', 'node'],
      registers: [registry],
    });
    gauge.set({ version: info.version, revision: info.revision, node: info.node }, 1);
    return gauge;
  });
}
