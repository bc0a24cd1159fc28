// Prometheus and promtool for tests of the shipped monitoring (decision 023): built from the Go module proxy into
// the version-keyed cache like kube-apiserver, started on loopback with a config and rules a test writes.
import { spawn } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureBuilt } from './binaries.js';
import { freePort } from './ports.js';
import { startProcess, type ManagedProcess } from './processes.js';
import { PROMETHEUS_VERSION } from './versions.js';

const BUILD_SCRIPT = fileURLToPath(new URL('../scripts/build-prometheus.sh', import.meta.url));

export interface PrometheusBinaries {
  prometheus: string;
  promtool: string;
}

/** Prometheus and promtool: KUBEBUILDER_ASSETS, the cache, else a build (cold: about 10 min on 2 cores). */
export async function ensurePrometheusBinaries(
  options: { log?: (line: string) => void } = {},
): Promise<PrometheusBinaries> {
  const prometheus = `prometheus-${PROMETHEUS_VERSION}`;
  const promtool = `promtool-${PROMETHEUS_VERSION}`;
  const { paths } = await ensureBuilt({
    names: [promtool, prometheus],
    what: `Prometheus and promtool ${PROMETHEUS_VERSION}`,
    script: BUILD_SCRIPT,
    lockName: '.building-prometheus',
    log: options.log,
  });
  return { prometheus: paths[prometheus]!, promtool: paths[promtool]! };
}

/** Runs promtool with `args`; resolves with its exit code and output (stdout then stderr). */
export async function runPromtool(
  args: string[],
  options: { cwd?: string } = {},
): Promise<{ code: number | null; output: string }> {
  const { promtool } = await ensurePrometheusBinaries();
  return new Promise((resolve, reject) => {
    const child = spawn(promtool, args, { cwd: options.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output: out + err }));
  });
}

export interface PrometheusOptions {
  /** Directory for the config, TSDB and log. */
  dir: string;
  /** The whole prometheus.yml, without `rule_files` (the rules below are added). */
  config: Record<string, unknown>;
  /** Rule files as text (a PrometheusRule's `spec`), written next to the config. */
  ruleFiles?: Record<string, string>;
}

export interface RunningPrometheus {
  /** http://127.0.0.1:<port> */
  readonly url: string;
  readonly logFile: string;
  /** GET /api/v1/<path> and its `data`; throws with Prometheus's error otherwise. */
  api<T = unknown>(path: string): Promise<T>;
  /** An instant query's vector result. */
  query(expr: string): Promise<{ metric: Record<string, string>; value: [number, string] }[]>;
  stop(): Promise<void>;
}

/** Starts Prometheus on a free loopback port and waits until it is ready. */
export async function startPrometheus(options: PrometheusOptions): Promise<RunningPrometheus> {
  const { prometheus } = await ensurePrometheusBinaries();
  await mkdir(options.dir, { recursive: true });
  const ruleNames = Object.keys(options.ruleFiles ?? {});
  for (const [name, text] of Object.entries(options.ruleFiles ?? {})) {
    await writeFile(join(options.dir, name), text);
  }
  const configFile = join(options.dir, 'prometheus.json.yml');
  // JSON is YAML: no serializer needed.
  await writeFile(configFile, JSON.stringify({ ...options.config, rule_files: ruleNames }, null, 2));
  const port = await freePort();
  const logFile = join(options.dir, 'prometheus.log');
  const url = `http://127.0.0.1:${port}`;
  const child: ManagedProcess = startProcess(
    prometheus,
    [
      `--config.file=${configFile}`,
      `--storage.tsdb.path=${join(options.dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--web.enable-lifecycle',
    ],
    logFile,
  );
  const api = async <T>(path: string): Promise<T> => {
    const response = await fetch(`${url}/api/v1/${path}`);
    const body = (await response.json()) as { status: string; data?: T; error?: string };
    if (body.status !== 'success') throw new Error(`prometheus ${path}: ${body.error ?? response.status}`);
    return body.data as T;
  };
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (!child.isRunning()) throw new Error(`prometheus exited at start; see ${logFile}`);
    const ready = await fetch(`${url}/-/ready`).then(
      (response) => response.ok,
      () => false,
    );
    if (ready) break;
    if (Date.now() > deadline) {
      await child.stop();
      throw new Error(`prometheus not ready after 120 s; see ${logFile}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return {
    url,
    logFile,
    api,
    async query(expr) {
      const data = await api<{ result: { metric: Record<string, string>; value: [number, string] }[] }>(
        `query?query=${encodeURIComponent(expr)}`,
      );
      return data.result;
    },
    stop: () => child.stop(5_000),
  };
}
