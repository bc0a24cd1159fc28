// The skr-certs command line: commands, exit codes (0 ok, 1 failure, 2 usage error) and output.
import { Command, CommanderError, Option } from 'commander';
import { versionLine } from '@skr-watcher/api';
import { DEFAULT_CA_VALIDITY_DAYS, DEFAULT_LEAF_VALIDITY_DAYS } from '@skr-watcher/pki';
import { initCa } from './commands/init-ca.js';
import { inspect } from './commands/inspect.js';
import { issue } from './commands/issue.js';
import { rotateCaCommand } from './commands/rotate-ca.js';
import { status } from './commands/status.js';
import { verify } from './commands/verify.js';
import { render, type CommandResult, type OutputFormat } from './output.js';
import {
  UsageError,
  collect,
  keyBitsOption,
  namespaceOption,
  outputOption,
  parseDurationOption,
  parseInstant,
  parsePositiveInteger,
  parsePositiveNumber,
} from './options.js';

export const EXIT = { ok: 0, failure: 1, usage: 2 } as const;

export interface CliIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  now: () => Date;
}

/** The error and its causes on one line each, so "read Secret x" shows the API server's reason below it. */
function describeError(error: unknown): string {
  const lines: string[] = [];
  let current: unknown = error;
  for (let depth = 0; current !== undefined && depth < 5; depth++) {
    if (current instanceof Error) {
      const code = (current as { code?: unknown }).code;
      lines.push(
        `${depth === 0 ? 'error' : '  caused by'}: ${current.message}${typeof code === 'number' ? ` (HTTP ${code})` : ''}`,
      );
      if (process.env['SKR_CERTS_DEBUG']) lines.push(String(current.stack));
      current = current.cause;
    } else {
      lines.push(`  caused by: ${String(current)}`);
      current = undefined;
    }
  }
  return `${lines.join('\n')}\n`;
}

export async function runCli(argv: string[], io: CliIo): Promise<number> {
  let exitCode: number = EXIT.ok;
  const emit = (result: CommandResult, format: OutputFormat) => io.stdout.write(render(result, format));
  const progress = (message: string) => io.stderr.write(`${message}\n`);

  const program = new Command('skr-certs')
    .description('Certificates of skr-watcher: the KCP CA, per-SKR leaves, trust bundles and CA rotation.')
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s) })
    .version(versionLine('skr-certs'), '-V, --version', 'print the version and exit')
    .showHelpAfterError('(add --help for usage)')
    .allowExcessArguments(false);

  program
    .command('init-ca')
    .description('create a CA: into --out-dir (ca.crt, ca.key 0600) or into the KCP Secrets')
    .option('--common-name <cn>', 'subject CN of the CA', 'skr-watcher-ca')
    .addOption(keyBitsOption(4096))
    .option('--validity-days <days>', 'lifetime of the CA', parsePositiveNumber, DEFAULT_CA_VALIDITY_DAYS)
    .option('--out-dir <dir>', 'write ca.crt and ca.key into this directory')
    .option('--force', 'overwrite existing files in --out-dir')
    .option('--kubeconfig <path>', 'write Secrets skr-watcher-ca and skr-watcher-ca-bundle into the KCP')
    .addOption(namespaceOption())
    .addOption(outputOption())
    .action(async (opts: Parameters<typeof initCa>[0] & { output: OutputFormat }) => {
      emit(await initCa(opts, io.now()), opts.output);
    });

  program
    .command('issue')
    .description('issue an SKR leaf: CN = runtime-id, SANs = domains + the webhook Service names (+ IPs)')
    .requiredOption('--runtime-id <id>', 'the SKR identity (certificate CN)')
    .requiredOption('--domain <name>', 'SKR DNS name (skr-domain); repeatable', collect)
    .option('--ip <address>', 'IP address SAN, e.g. 127.0.0.1 in local mode; repeatable', collect)
    .addOption(keyBitsOption(2048))
    .option('--validity-days <days>', 'lifetime of the leaf', parsePositiveNumber, DEFAULT_LEAF_VALIDITY_DAYS)
    .option('--ca-cert <file>', 'CA certificate (file mode)')
    .option('--ca-key <file>', 'CA private key (file mode)')
    .option('--ca-bundle <file>', 'bundle written as ca.crt (file mode; default: the CA certificate)')
    .option('--out-dir <dir>', 'write tls.crt, tls.key (0600) and ca.crt here (file mode)')
    .option('--force', 'overwrite existing files in --out-dir')
    .option('--kubeconfig <path>', 'issue with the KCP CA into Secret <kyma>-webhook-tls')
    .option('--kyma <name>', 'Kyma name of the SKR (KCP mode)')
    .option('--listener', "KCP mode: the listener's serving certificate, into Secret skr-agent-listener-tls")
    .addOption(namespaceOption())
    .addOption(outputOption())
    .action(async (opts: Parameters<typeof issue>[0] & { output: OutputFormat }) => {
      emit(await issue(opts, io.now()), opts.output);
    });

  program
    .command('inspect')
    .description('describe the certificates of a PEM file or of a Secret (keys are never printed)')
    .argument('[file]', 'PEM file with one or more certificates')
    .option('--secret <namespace/name>', 'a Secret in the cluster of --kubeconfig')
    .option('--kubeconfig <path>', 'kubeconfig for --secret')
    .addOption(outputOption())
    .action(
      async (file: string | undefined, opts: Parameters<typeof inspect>[1] & { output: OutputFormat }) => {
        emit(await inspect(file, opts), opts.output);
      },
    );

  program
    .command('verify')
    .description('verify a leaf against a CA bundle; exit code 1 when it does not verify')
    .requiredOption('--ca-bundle <file>', 'PEM bundle of trusted CAs')
    .requiredOption('--cert <file>', 'the leaf certificate')
    .option('--at <time>', 'verify at this RFC 3339 instant instead of now', parseInstant)
    .option('--usage <usage>', 'required extended key usage (serverAuth, clientAuth); repeatable', collect)
    .addOption(outputOption())
    .action((opts: { caBundle: string; cert: string; at?: Date; usage?: string[]; output: OutputFormat }) => {
      const usages = opts.usage ?? [];
      const bad = usages.filter((u) => u !== 'serverAuth' && u !== 'clientAuth');
      if (bad.length > 0)
        throw new UsageError(`--usage must be serverAuth or clientAuth, got ${bad.join(', ')}`);
      const { result, verdict } = verify(
        { ...opts, usage: usages as ('serverAuth' | 'clientAuth')[] },
        io.now(),
      );
      emit(result, opts.output);
      if (!verdict.ok) exitCode = EXIT.failure;
    });

  program
    .command('rotate-ca')
    .description(
      'run or resume the CA rotation: trust the new CA, re-issue leaves, switch signing, drop the old CA after the grace period',
    )
    .requiredOption('--kubeconfig <path>', 'kubeconfig of the KCP')
    .addOption(namespaceOption())
    .addOption(
      new Option(
        '--grace-period <duration>',
        'time between the last re-issue and dropping the old CA (90s, 15m, 24h, 7d)',
      )
        .argParser(parseDurationOption)
        .default(3_600_000, '1h'),
    )
    .addOption(
      new Option(
        '--propagation-delay <duration>',
        'time the new CA stays in the bundle before any leaf is signed by it; kubelet syncs Secret volumes every 60-90 s, so the listener and the SKR webhooks need that long to trust it',
      )
        .argParser(parseDurationOption)
        .default(120_000, '2m'),
    )
    .option('--dry-run', 'print the plan, write nothing')
    .option('--new', 'start another rotation even though the last one completed')
    .option('--wait', 'sleep through the propagation delay and the grace period instead of stopping there')
    .option('--steps <n>', 'stop after this many steps', parsePositiveInteger)
    .option('--common-name <cn>', 'CN prefix of the new CA (a timestamp is appended)', 'skr-watcher-ca')
    .addOption(keyBitsOption(4096))
    .option('--validity-days <days>', 'lifetime of the new CA', parsePositiveNumber, DEFAULT_CA_VALIDITY_DAYS)
    .option('--reason <text>', 'why: recorded in the audit line (stderr) and the Event on the CA Secret')
    .addOption(outputOption())
    .action(async (opts: Parameters<typeof rotateCaCommand>[0] & { output: OutputFormat }) => {
      emit(
        await rotateCaCommand(opts, progress, { audit: (line) => io.stderr.write(line), now: io.now }),
        opts.output,
      );
    });

  program
    .command('status')
    .description('one row per SKR certificate: runtime-id, not-after, issuer, what it needs')
    .requiredOption('--kubeconfig <path>', 'kubeconfig of the KCP')
    .addOption(namespaceOption())
    .addOption(outputOption())
    .action(async (opts: Parameters<typeof status>[0] & { output: OutputFormat }) => {
      emit(await status(opts, io.now()), opts.output);
    });

  try {
    if (argv.length <= 2) {
      program.outputHelp({ error: true });
      return EXIT.usage;
    }
    await program.parseAsync(argv);
    return exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      const benign = ['commander.helpDisplayed', 'commander.help', 'commander.version'];
      return benign.includes(error.code) ? EXIT.ok : EXIT.usage;
    }
    if (error instanceof UsageError) {
      io.stderr.write(`error: ${error.message}\n(add --help for usage)\n`);
      return EXIT.usage;
    }
    io.stderr.write(describeError(error));
    return EXIT.failure;
  }
}
