#!/usr/bin/env node
// skr-testenv: real control planes on this machine, for tests, the demo and kubectl experiments.
import { mkdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { ensureBinaries } from './binaries.js';
import { startEnvironment } from './environment.js';
import { KUBERNETES_VERSION, ETCD_VERSION } from './versions.js';

const program = new Command('skr-testenv')
  .description(
    `Starts real kube-apiserver ${KUBERNETES_VERSION} + etcd ${ETCD_VERSION} control planes on loopback.`,
  )
  .showHelpAfterError()
  .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : 2));

program
  .command('binaries')
  .description('print where kube-apiserver and etcd are, building them from the Go module proxy if needed')
  .action(async () => {
    const found = await ensureBinaries();
    process.stdout.write(
      `kube-apiserver ${found.kubeApiserver}\netcd ${found.etcd}\nsource ${found.source}\n`,
    );
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
  .action(async (opts: { planes: string[]; dir: string }) => {
    const dir = resolve(opts.dir);
    await mkdir(dir, { recursive: true });
    const env = await startEnvironment({
      planes: opts.planes,
      dir,
      log: (l) => process.stderr.write(l + '\n'),
    });
    const lines = env.planes.map(
      (p) => `  ${p.name.padEnd(6)} ${p.url}   kubectl --kubeconfig ${p.kubeconfigPath} get kymas -A`,
    );
    process.stdout.write(
      `ready: ${env.planes.length} control planes\n${lines.join('\n')}\nlogs in ${dir}; Ctrl-C stops them\n`,
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
