// skr-agent from source as a child process, for the suites that test the binary: its output kept for failure
// messages, its exit awaited; and the flags that give it a direct mTLS listener or keep it quiet.
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KCP_LISTENER_IDENTITY } from '@skr-watcher/api';
import { issueTestLeaf, type TestCa } from './listener-certs.js';

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));

export interface AgentChild {
  child: ChildProcess;
  /** The last `keep` characters of its stdout and stderr. */
  output: () => string;
  exited: Promise<number | null>;
}

/** `skr-agent <args>` under node itself (not the tsx wrapper), so that SIGKILL and SIGTERM reach the agent. */
export function spawnAgent(args: string[], keep = 20_000): AgentChild {
  const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=source', MAIN, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const append = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-keep));
  child.stdout?.on('data', append);
  child.stderr?.on('data', append);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

/**
 * `skr-agent run` on the Kymas of a KCP namespace; its metrics and event stream on free loopback ports unless `flags`
 * name their addresses.
 */
export function runAgent(
  kubeconfigPath: string,
  namespace: string,
  flags: string[],
  keep?: number,
): AgentChild {
  const loopback = (flag: string) => (flags.includes(flag) ? [] : [flag, '127.0.0.1:0']);
  return spawnAgent(
    [
      'run',
      '--kubeconfig',
      kubeconfigPath,
      '--namespace',
      namespace,
      ...loopback('--metrics-address'),
      ...loopback('--events-address'),
      ...flags,
    ],
    keep,
  );
}

/** Requeues and resync an hour apart: within a test only a callback (or a watch) explains a reconcile. */
export const QUIET_REQUEUE_FLAGS = [
  ...['--requeue-ready', '--requeue-processing', '--requeue-warning', '--requeue-error'].flatMap((f) => [
    f,
    '1h',
  ]),
  '--resync-interval',
  '1h',
];

/**
 * Writes the listener's certificate (CN `KCP_LISTENER_IDENTITY`, for client use too, as `skr-certs` issues it:
 * replicas forward callbacks to each other with it), its key and `ca` into `dir` (`tls.crt`, `tls.key`, `ca.crt`),
 * and returns the flags of a direct listener on `port` that uses them.
 */
export async function listenerFlags(dir: string, ca: TestCa, port: number): Promise<string[]> {
  const serving = issueTestLeaf(ca, {
    commonName: KCP_LISTENER_IDENTITY,
    dnsNames: ['localhost'],
    ipAddresses: ['127.0.0.1'],
  });
  await writeFile(join(dir, 'tls.crt'), serving.certPem);
  await writeFile(join(dir, 'tls.key'), serving.keyPem, { mode: 0o600 });
  await writeFile(join(dir, 'ca.crt'), ca.certPem);
  return [
    '--listen-address',
    `127.0.0.1:${port}`,
    '--tls-cert',
    join(dir, 'tls.crt'),
    '--tls-key',
    join(dir, 'tls.key'),
    '--ca-bundle',
    join(dir, 'ca.crt'),
  ];
}
