// The skr-modules command line: commands, exit codes (0 ok, 1 failure, 2 usage error) and output.
import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { isModuleSourceError } from '@skr-watcher/oci';
import { UsageError, type CliIo } from './cli-io.js';
import { inspect, type InspectOptions } from './inspect.js';
import { publish, type PublishOptions } from './publish.js';

export const EXIT = { ok: 0, failure: 1, usage: 2 } as const;

const VERSION = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

function describeError(error: unknown): string {
  const lines: string[] = [];
  let current: unknown = error;
  for (let depth = 0; current instanceof Error && depth < 4; depth++) {
    const reason = isModuleSourceError(current) ? ` [${current.reason}]` : '';
    lines.push(`${depth === 0 ? 'error' : '  caused by'}: ${current.message}${reason}`);
    if (process.env['SKR_MODULES_DEBUG']) lines.push(String(current.stack));
    current = current.cause;
  }
  return `${lines.join('\n')}\n`;
}

/** What to use instead of a `modulectl create` flag that skr-modules does not take. */
const MODULECTL_FLAGS: Record<string, string> = {
  '--insecure': 'plain HTTP is written into --registry: --registry http://host:port',
  '--registry-credentials': 'give a .dockerconfigjson file with --credentials <file>',
  '--registry-cred-selector': 'the agent reads registry credentials from --oci-registry-cred-secret',
  '--git-remote': 'skr-modules adds no git source to the component version',
  '--module-config-file': 'the file is given with --config-file (-c)',
};

function modulectlHint(message: string): string {
  const flag = /unknown option '([^'=]+)/.exec(message)?.[1];
  const hint = flag === undefined ? undefined : MODULECTL_FLAGS[flag];
  return hint ? `(${flag} is modulectl's: ${hint})\n` : '';
}

const REGISTRY_HELP =
  'registry as --oci-registry-host takes it: host[:port][/path], http:// for plain HTTP, https:// is the default';

export async function runCli(argv: string[], io: CliIo): Promise<number> {
  let exitCode: number = EXIT.ok;
  const program = new Command('skr-modules')
    .description(
      "Publishes module versions into an OCI registry in modulectl's layout (OCM component versions under\n" +
        'component-descriptors/) and shows what a registry holds. skr-agent reads modules from there\n' +
        '(--oci-registry-host, --modules-repository-subpath, --oci-registry-cred-secret).',
    )
    .version(VERSION, '--version', 'print the version')
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s) })
    .showHelpAfterError('(add --help for usage)')
    .allowExcessArguments(false)
    // `publish --version 1.0.0` is the module's version: program options only before the command.
    .enablePositionalOptions();

  const connection = (command: Command) =>
    command
      .option('--subpath <path>', 'repository path below the host (--modules-repository-subpath)')
      .option(
        '--credentials <file>',
        'a .dockerconfigjson file with one auths entry (what the --oci-registry-cred-secret Secret holds)',
      )
      .option('--ca-file <file>', 'PEM of a CA to trust for an HTTPS registry')
      .option('--timeout <seconds>', 'bound of each registry request', '30');

  connection(
    program
      .command('publish')
      .description(
        'write a module version into the registry and print its ModuleTemplate and ModuleReleaseMeta (YAML)',
      )
      .option(
        '-c, --config-file <path>',
        "modulectl's module-config.yaml (name, version, manifest, defaultCR, security, channel, manager, ...); " +
          'flags given beside it win',
      )
      .option('--registry <registry>', `required: ${REGISTRY_HELP}`)
      .option('--name <module>', 'module name, e.g. template-operator (required without --config-file)')
      .option('--version <version>', 'module version (semver), e.g. 1.0.5 (required without --config-file)')
      .option(
        '--manifest <path>',
        "the module's objects: a YAML file or URL, or a directory whose *.yaml/*.yml files are joined in name " +
          'order (required without --config-file)',
      )
      .option(
        '--default-cr <file>',
        'the default Module CR (YAML of one object, a file or URL): spec.data and the default-cr layer',
      )
      .option('--ocm-component-name <name>', 'OCM component name (default: kyma-project.io/module/<module>)')
      .option('--channel <channel>', 'channel the ModuleReleaseMeta serves it in (repeatable)', collect)
      .option('--mandatory', 'a mandatory module (ModuleReleaseMeta spec.mandatory instead of channels)')
      .option(
        '--image <name=reference>',
        'an image the module runs, for image localization (repeatable)',
        collect,
      )
      .option('--requires-downtime', 'upgrades of this version need a maintenance window')
      .option(
        '--namespace <namespace>',
        'namespace of the printed ModuleTemplate and ModuleReleaseMeta',
        'kcp-system',
      )
      .option('--manager <kind:namespace/name>', "the module's manager workload, e.g. Deployment:ns/operator")
      .option('--repository-url <url>', 'spec.info.repository of the ModuleTemplate')
      .option('--documentation-url <url>', 'spec.info.documentation of the ModuleTemplate')
      .option('-o, --output <format>', 'yaml or json', 'yaml'),
  ).action(async (opts: PublishOptions, command: Command) => {
    await publish(opts, io, (option) => command.getOptionValueSource(option) === 'cli');
  });

  connection(
    program
      .command('inspect')
      .description(
        'list the module components a registry holds, the versions of one, or what one version contains',
      )
      .argument('<registry>', REGISTRY_HELP)
      .argument('[component]', 'component name, or component:version for its contents')
      .option('-o, --output <format>', 'text or json', 'text'),
  ).action(async (registry: string, component: string | undefined, opts: InspectOptions) => {
    await inspect(registry, component, opts, io);
  });

  try {
    await program.parseAsync(argv);
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.code === 'commander.unknownOption') io.stderr.write(modulectlHint(error.message));
      exitCode = error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    } else if (error instanceof UsageError) {
      io.stderr.write(`error: ${error.message}\n(add --help for usage)\n`);
      exitCode = EXIT.usage;
    } else {
      io.stderr.write(describeError(error));
      exitCode = isModuleSourceError(error) && error.reason === 'Misconfigured' ? EXIT.usage : EXIT.failure;
    }
  }
  return exitCode;
}
