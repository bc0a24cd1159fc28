// Writes docs/configuration.md from the command-line definitions of the binaries, so the reference cannot drift
// from the flags: each binary's entry module is imported with commander's parse methods replaced by a catch that
// keeps the program instead of running it, and every command, argument and option of that program is rendered.
//
//   npm run generate:docs            rewrite docs/configuration.md
//   npm run generate:docs -- --check exit 1 when docs/configuration.md differs from what would be written
//   npm run generate:docs -- --stdout print instead of writing
import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Command, type Argument, type Option } from 'commander';

export const CONFIGURATION_DOC = fileURLToPath(new URL('../docs/configuration.md', import.meta.url));

interface Binary {
  name: string;
  /** Where it runs and how it is configured, in a sentence or two. */
  about: string;
  /** The module whose import builds the program and parses the command line. */
  entry: string;
}

const BINARIES: Binary[] = [
  {
    name: 'skr-agent',
    about:
      'The KCP agent: callback listener, reconciliation, webhook registration, module installation. Runs in the KCP ' +
      '(`manifests/kcp`). Durations are written like `500ms`, `30s`, `10m`, `1h30m` or `7d`.',
    entry: '../agent/src/main.js',
  },
  {
    name: 'skr-webhook',
    about:
      'The admission webhook in each SKR. The agent installs and configures it with `--register-skr-webhook`; ' +
      'every option also reads the environment variable beside it (a flag wins, an empty variable counts as unset).',
    entry: '../webhook/src/main.js',
  },
  {
    name: 'skr-certs',
    about:
      'The certificate tool: the KCP CA, SKR and listener certificates, and CA rotation. Exit codes: 0 ok, 1 failure, 2 usage.',
    entry: '../certs/src/main.js',
  },
  {
    name: 'skr-modules',
    about:
      'Publishes module versions into an OCI registry and shows what a registry holds. Exit codes: 0 ok, 1 failure, 2 usage.',
    entry: '../modules/src/main.js',
  },
  {
    name: 'sample-manager',
    about:
      'The sample module manager. Every manager built with `runModuleManager` from `@skr-watcher/module-manager` ' +
      'takes these options.',
    entry: '../examples/sample-manager/src/main.js',
  },
  {
    name: 'skr-testenv',
    about: 'Local control planes for tests, the demo and experiments.',
    entry: '../packages/testenv/src/cli.js',
  },
];

/** Thrown instead of parsing, so a binary whose start continues after a synchronous parse stops there. */
class Captured extends Error {}

/** Imports a binary's entry module and returns the program it would have parsed, without running it. */
async function programOf(binary: Binary): Promise<Command> {
  const programs: Command[] = [];
  const { parse, parseAsync } = Command.prototype;
  const argv = process.argv;
  // What a binary sees as its command line; some print their help without parsing when given none.
  process.argv = [argv[0] ?? 'node', binary.name, '--help'];
  Command.prototype.parseAsync = function (this: Command) {
    programs.push(this);
    return Promise.resolve(this);
  };
  Command.prototype.parse = function (this: Command): Command {
    programs.push(this);
    throw new Captured(binary.name);
  };
  try {
    await import(binary.entry);
  } catch (error) {
    if (!(error instanceof Captured)) throw new Error(`import ${binary.entry}`, { cause: error });
  } finally {
    process.argv = argv;
    Command.prototype.parse = parse;
    Command.prototype.parseAsync = parseAsync;
  }
  const [program] = programs;
  if (!program) throw new Error(`${binary.entry} built no command-line program`);
  return program;
}

const cell = (text: string) => text.replace(/\s*\n\s*/g, ' ').replace(/\|/g, '\\|');
const code = (text: string) => (text === '' ? '' : `\`${text.replace(/\|/g, '\\|')}\``);

function defaultOf(option: Option): string {
  if (option.mandatory) return 'required';
  if (option.negate) return '';
  if (option.defaultValueDescription !== undefined) return code(option.defaultValueDescription);
  const value: unknown = option.defaultValue;
  if (value === undefined) return '';
  if (Array.isArray(value)) return code(value.map(String).join(','));
  return code(typeof value === 'string' ? value : JSON.stringify(value));
}

function optionRow(option: Option, withEnv: boolean): string {
  const choices = option.argChoices ? ` (one of ${option.argChoices.map((c) => code(c)).join(', ')})` : '';
  const env = withEnv ? ` ${code(option.envVar ?? '')} |` : '';
  return `| ${code(option.flags)} |${env} ${defaultOf(option)} | ${cell(option.description)}${cell(choices)} |`;
}

function argumentRow(argument: Argument): string {
  const name = `${argument.name()}${argument.variadic ? '...' : ''}`;
  return `| ${code(argument.required ? `<${name}>` : `[${name}]`)} | ${argument.required ? 'required' : 'optional'} | ${cell(argument.description)} |`;
}

function renderCommand(command: Command, path: string[], depth: number, about?: string): string[] {
  const lines: string[] = [];
  lines.push(`${'#'.repeat(depth)} ${path.join(' ')}`, '');
  if (about) lines.push(about, '');
  if (command.description()) lines.push(cell(command.description()), '');
  const args = command.registeredArguments;
  if (args.length > 0) {
    lines.push('| argument | | description |', '|---|---|---|', ...args.map(argumentRow), '');
  }
  const options = command.options.filter((option) => !option.hidden);
  if (options.length > 0) {
    const withEnv = options.some((option) => option.envVar);
    const rows = options.map((option) => optionRow(option, withEnv));
    lines.push(
      withEnv ? '| option | environment | default | description |' : '| option | default | description |',
      withEnv ? '|---|---|---|---|' : '|---|---|---|',
      ...rows,
      '',
    );
  }
  for (const sub of command.commands) {
    if (sub.name() === 'help') continue;
    lines.push(...renderCommand(sub, [...path, sub.name()], depth + 1));
  }
  return lines;
}

/** The whole of docs/configuration.md. */
export async function renderConfigurationDoc(): Promise<string> {
  // A default read from the environment would make the page depend on the shell it was generated in.
  delete process.env['MAINTENANCE_POLICY_PATH'];
  const lines = [
    "<!-- Generated by scripts/generate-config-docs.ts from the binaries' command-line definitions: run",
    '     `npm run generate:docs` after changing a flag; test/integration/docs.test.ts fails when this file is stale. -->',
    '',
    '# Configuration reference',
    '',
    'Every option of every binary, as its `--help` describes it. Every binary also answers `--help`; the',
    'deployment defaults are in `manifests/kcp/agent.yaml` (the agent) and in what the agent installs in each SKR',
    '(the webhook). Behaviour behind the options: [architecture](architecture.md), [modules](modules.md),',
    '[sharding](sharding.md), [operations](operations.md).',
    '',
  ];
  for (const binary of BINARIES) {
    const program = await programOf(binary);
    lines.push(...renderCommand(program, [binary.name], 2, binary.about));
  }
  return `${lines
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trimEnd()}\n`;
}

async function main(argv: string[]): Promise<number> {
  const text = await renderConfigurationDoc();
  if (argv.includes('--stdout')) {
    process.stdout.write(text);
    return 0;
  }
  if (argv.includes('--check')) {
    const committed = await readFile(CONFIGURATION_DOC, 'utf8').catch(() => '');
    if (committed === text) return 0;
    process.stderr.write('docs/configuration.md is stale: run npm run generate:docs\n');
    return 1;
  }
  await writeFile(CONFIGURATION_DOC, text);
  process.stderr.write('wrote docs/configuration.md\n');
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  // Exit explicitly: the imported entry modules may hold handles (loggers, timers) that keep the process alive.
  process.exit(await main(process.argv.slice(2)));
}
