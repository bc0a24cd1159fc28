#!/usr/bin/env node
// skr-testenv: real control planes on this machine, for tests, the demo and kubectl experiments.
import { mkdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { ensureBinaries } from './binaries.js';
import { ensurePrometheusBinaries } from './prometheus.js';
import { ensureNodeBinaries, nodeSupportProblem } from './node-binaries.js';
import { ensureRegistryBinary } from './registry.js';
import { startEnvironment } from './environment.js';
import { runCleanupScript } from './run-network.js';
import { versionLine } from '@skr-watcher/api';
import { KUBERNETES_VERSION, ETCD_VERSION } from './versions.js';

const program = new Command('skr-testenv')
  .description(
    `Starts real kube-apiserver ${KUBERNETES_VERSION} + etcd ${ETCD_VERSION} control planes on loopback.`,
  )
  .version(versionLine('skr-testenv'), '-V, --version', 'print the version and exit')
  .showHelpAfterError()
  .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : 2));

program
  .command('binaries')
  .description(
    'print where kube-apiserver, etcd, the test registry, prometheus and promtool are, building them from the Go module proxy if needed',
  )
  .option(
    '--nodes',
    'also kubelet, kube-controller-manager, kube-scheduler, kube-proxy, crane, registry, kustomize',
  )
  .action(async (opts: { nodes?: boolean }) => {
    const found = await ensureBinaries();
    process.stdout.write(
      `kube-apiserver ${found.kubeApiserver}\netcd ${found.etcd}\nsource ${found.source}\n`,
    );
    process.stdout.write(`oci-registry ${await ensureRegistryBinary()}\n`);
    const prometheus = await ensurePrometheusBinaries();
    process.stdout.write(`prometheus ${prometheus.prometheus}\npromtool ${prometheus.promtool}\n`);
    if (opts.nodes) {
      const node = await ensureNodeBinaries();
      for (const [name, path] of Object.entries(node)) process.stdout.write(`${name} ${path}\n`);
    }
  });

program
  .command('cleanup')
  .description('undo the host changes of runs with nodes whose owner process is gone (--check: only report)')
  .option('--check', 'print what any run left behind; exit 1 if anything')
  .action((opts: { check?: boolean }) => {
    const result = runCleanupScript(opts.check ? '--check' : '--stale');
    process.stdout.write(result.output);
    process.exitCode = result.status;
  });

program
  .command('up')
  .description('start the planes, write one kubeconfig per plane, run until Ctrl-C')
  .option(
    '--planes <names>',
    'comma-separated plane names',
    (value: string) => {
      const names = value
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      if (names.length === 0) throw new InvalidArgumentError('give at least one plane name');
      return names;
    },
    ['kcp', 'skr1', 'skr2'],
  )
  .option('--dir <dir>', 'directory for kubeconfigs, data and logs', '.skr-testenv')
  .option(
    '--nodes',
    'give every plane a node (containerd, kubelet, kube-proxy, controller-manager, scheduler), a registry and the image',
  )
  .action(async (opts: { planes: string[]; dir: string; nodes?: boolean }) => {
    const dir = resolve(opts.dir);
    if (opts.nodes) {
      const problem = nodeSupportProblem();
      if (problem) throw new Error(`--nodes: ${problem}`);
    }
    await mkdir(dir, { recursive: true });
    const env = await startEnvironment({
      planes: opts.planes,
      dir,
      nodes: opts.nodes,
      log: (l) => process.stderr.write(l + '\n'),
    });
    const lines = env.planes.map(
      (p) => `  ${p.name.padEnd(6)} ${p.url}   kubectl --kubeconfig ${p.kubeconfigPath} get kymas -A`,
    );
    const nodeLines = env.nodes
      ? [
          `registry ${env.nodes.registry} (plain HTTP), image ${env.nodes.images.app}`,
          ...env.planes.map((p) => {
            const node = env.nodes?.node(p.name);
            return `  node ${node?.name} ${node?.ip}: kubectl --kubeconfig ${p.kubeconfigPath} get pods -A -o wide`;
          }),
        ]
      : [];
    process.stdout.write(
      `ready: ${env.planes.length} control planes\n${[...lines, ...nodeLines].join('\n')}\nlogs in ${dir}; Ctrl-C stops them\n`,
    );
    let stopping = false;
    const shutdown = () => {
      if (stopping) return;
      stopping = true;
      process.stderr.write('[testenv] stopping\n');
      env.stop().then(
        () => process.exit(0),
        (error: unknown) => {
          process.stderr.write(`[testenv] stop failed: ${String(error)}\n`);
          process.exit(1);
        },
      );
    };
    process.on('SIGINT', shutdown);
    process.on('SIGTERM', shutdown);
  });

program.parseAsync().catch((error: unknown) => {
  process.stderr.write(`skr-testenv: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
