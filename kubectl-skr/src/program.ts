// The kubectl-skr command line: kubectl's conventions (--kubeconfig, --context, -n, -o, completion), exit codes
// 0 ok, 1 failure (a refusal included, shown as one line), 2 usage error.
import { Argument, Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { DEFAULTS, parseDuration, versionLine } from '@skr-watcher/api';
import { runAdminAction, type AdminIo } from './admin.js';
import { SHELLS, completionQuery, completionScript, type Shell } from './completion.js';
import { explainKyma, renderExplanation } from './explain.js';
import { readFleet, renderFleet } from './fleet.js';
import { PluginError, connect, loadKubeConfig, type ConnectionOptions } from './kcp.js';
import { OUTPUT_FORMATS, type OutputFormat } from './output.js';

export const EXIT = { ok: 0, failure: 1, usage: 2 } as const;

export interface PluginIo extends AdminIo {
  /** Resolves when the user interrupts (Ctrl-C); only `status --watch` asks, so elsewhere Ctrl-C stops at once. */
  interrupted: () => Promise<void>;
}

const BINARY = 'kubectl-skr';

const EXAMPLES = `
Examples:
  # the fleet at a glance: Kymas and modules by state, the unhealthy first with their reason
  kubectl skr status
  kubectl skr status -o wide --watch

  # one SKR on one screen: state, conditions, modules, webhook, certificate, Events, what to do next
  kubectl skr explain my-kyma

  # stop the agent from touching a Kyma while you work on it, and hand it back
  kubectl skr pause my-kyma --reason "INC-1234: restoring the SKR's kubeconfig"
  kubectl skr resume my-kyma --reason "kubeconfig restored"

  # ask the agent for a pass now and wait up to 30 s for its status write
  kubectl skr reconcile my-kyma --reason "after the registry outage" --wait 30s

  # shell completion
  source <(kubectl-skr completion bash)

pause, resume and reconcile write one JSON audit line to stderr and an Event on the Kyma, each naming you as the
API server knows you (SelfSubjectReview). Everything runs with your kubeconfig, so your RBAC decides what you may do.`;

function durationArgument(value: string): number {
  try {
    return parseDuration(value);
  } catch (error) {
    throw new InvalidArgumentError(error instanceof Error ? error.message : String(error));
  }
}

function positiveInteger(value: string): number {
  if (!/^[1-9]\d*$/.test(value)) throw new InvalidArgumentError('Expected a positive integer.');
  return Number(value);
}

const outputOption = () =>
  new Option('-o, --output <format>', 'output format').choices(OUTPUT_FORMATS).default('table');

interface GlobalOptions extends ConnectionOptions {
  output?: OutputFormat;
}

export async function runPlugin(argv: string[], io: PluginIo): Promise<number> {
  const connection = (command: Command): ConnectionOptions => {
    const options = command.optsWithGlobals<GlobalOptions>();
    return {
      namespace: options.namespace || DEFAULTS.kcpNamespace,
      ...(options.kubeconfig ? { kubeconfig: options.kubeconfig } : {}),
      ...(options.context ? { context: options.context } : {}),
    };
  };

  const program = new Command(BINARY)
    .description(
      'On-call tool for skr-watcher: read the fleet and one SKR, pause, resume and reconcile Kymas.',
    )
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s) })
    .version(versionLine(BINARY), '--version', 'print the version and exit')
    .option('--kubeconfig <path>', 'kubeconfig of the KCP (default: $KUBECONFIG, then ~/.kube/config)')
    .option('--context <name>', 'the kubeconfig context to use (default: its current context)')
    .option('-n, --namespace <namespace>', 'KCP namespace of the Kymas', DEFAULTS.kcpNamespace)
    .showHelpAfterError('(add --help for usage)')
    .allowExcessArguments(false)
    .addHelpText('after', EXAMPLES);

  program
    .command('status')
    .description('the fleet at a glance: Kymas by state, modules by state and version, the unhealthy first')
    .addOption(outputOption())
    .option('-w, --watch', 'print the report again whenever it changes, until Ctrl-C')
    .option('--interval <duration>', 'with --watch: how often to look (e.g. 2s, 1m)', durationArgument, 2_000)
    .action(
      async (options: { output: OutputFormat; watch?: boolean; interval: number }, command: Command) => {
        const kcp = connect(connection(command));
        let report = await readFleet(kcp);
        io.stdout.write(renderFleet(report, options.output, io.now()));
        if (!options.watch) return;
        let stopped = false;
        const interrupted = io.interrupted().then(() => (stopped = true));
        while (!stopped) {
          await Promise.race([io.sleep(options.interval), interrupted]);
          if (stopped) break;
          const next = await readFleet(kcp);
          // Compared as data: ages move on every look, a change of state is what is worth a new report.
          if (JSON.stringify(next) === JSON.stringify(report)) continue;
          report = next;
          io.stdout.write(`\n# ${io.now().toISOString()}\n${renderFleet(report, options.output, io.now())}`);
        }
      },
    );

  program
    .command('explain')
    .description(
      'everything about one SKR: state, conditions, modules, webhook, certificate, Events, next steps',
    )
    .argument('<kyma>', 'name of the KCP Kyma')
    .addOption(outputOption())
    .option('--events <n>', 'how many of the latest Events to show', positiveInteger, 10)
    .action(async (kyma: string, options: { output: OutputFormat; events: number }, command: Command) => {
      const now = io.now();
      const explanation = await explainKyma(connect(connection(command)), kyma, options.events, now);
      io.stdout.write(renderExplanation(explanation, options.output, now));
    });

  const reasonOption = (required: boolean) =>
    new Option(
      '--reason <text>',
      `why: recorded in the annotation, the Event and the audit line${required ? '' : ' (optional)'}`,
    );

  for (const action of ['pause', 'resume'] as const) {
    program
      .command(action)
      .description(
        action === 'pause'
          ? 'pause reconciliation of a Kyma (label skip-reconciliation=true), recording who and why'
          : 'resume reconciliation of a paused Kyma, recording who and why',
      )
      .argument('<kyma>', 'name of the KCP Kyma')
      .addOption(reasonOption(true).makeOptionMandatory())
      .action(async (kyma: string, options: { reason: string }, command: Command) => {
        if (!options.reason.trim()) throw new InvalidArgumentError('--reason must say why');
        await runAdminAction(connect(connection(command)), { action, kyma, reason: options.reason }, io);
      });
  }

  program
    .command('reconcile')
    .description(
      "ask the agent for one pass of a Kyma now (an annotation change wakes the agent's Kyma watch)",
    )
    .argument('<kyma>', 'name of the KCP Kyma')
    .addOption(reasonOption(false).default(''))
    .option(
      '--wait <duration>',
      "wait up to this long for the pass's status write (0: do not wait)",
      durationArgument,
      0,
    )
    .action(async (kyma: string, options: { reason: string; wait: number }, command: Command) => {
      await runAdminAction(
        connect(connection(command)),
        { action: 'reconcile', kyma, reason: options.reason, waitMs: options.wait },
        io,
      );
    });

  program
    .command('completion')
    .description('print a shell completion script: source <(kubectl-skr completion bash)')
    .addArgument(new Argument('<shell>', 'bash or zsh').choices(SHELLS))
    .action((shell: Shell) => {
      io.stdout.write(completionScript(shell));
    });

  // Completion gets the words as typed: commander would take --kubeconfig and -n for itself.
  if (argv[2] === '__complete') {
    io.stdout.write(await complete(argv.slice(3)));
    return EXIT.ok;
  }
  try {
    if (argv.length <= 2) {
      program.outputHelp({ error: true });
      return EXIT.usage;
    }
    await program.parseAsync(argv);
    return EXIT.ok;
  } catch (error) {
    if (error instanceof CommanderError) {
      const benign = ['commander.helpDisplayed', 'commander.help', 'commander.version'];
      return benign.includes(error.code) ? EXIT.ok : EXIT.usage;
    }
    if (error instanceof InvalidArgumentError) {
      io.stderr.write(`error: ${error.message}\n(add --help for usage)\n`);
      return EXIT.usage;
    }
    if (error instanceof PluginError) {
      io.stderr.write(`error: ${error.message}\n`);
      return EXIT.failure;
    }
    io.stderr.write(`error: ${error instanceof Error ? error.message : String(error)}\n`);
    if (process.env['KUBECTL_SKR_DEBUG'] && error instanceof Error) io.stderr.write(`${error.stack}\n`);
    return EXIT.failure;
  }
}

/** Candidates for the word being completed, one a line; a lookup that fails completes nothing, silently. */
async function complete(words: string[]): Promise<string> {
  const query = completionQuery(words.length === 0 ? [''] : words);
  let candidates = query.candidates ?? [];
  try {
    if (query.wants === 'contexts') {
      candidates = loadKubeConfig(
        query.connection.kubeconfig ? { kubeconfig: query.connection.kubeconfig } : {},
      )
        .getContexts()
        .map((context) => context.name);
    } else if (query.wants === 'kymas') {
      const kcp = connect({
        ...query.connection,
        namespace: query.connection.namespace || DEFAULTS.kcpNamespace,
      });
      candidates = (await kcp.list('kyma')).map(
        (kyma) => (kyma as { metadata?: { name?: string } }).metadata?.name ?? '',
      );
    }
  } catch {
    candidates = [];
  }
  const matching = candidates.filter((candidate) => candidate && candidate.startsWith(query.current));
  return matching.map((candidate) => `${candidate}\n`).join('');
}
