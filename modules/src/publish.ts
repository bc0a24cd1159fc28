// `skr-modules publish`: a module version into the registry, its ModuleTemplate and ModuleReleaseMeta out.
import { readdir, stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { parse, parseAllDocuments, stringify } from 'yaml';
import {
  parseManifestObjects,
  publishModule,
  registryConfigFromFlags,
  type CatalogObject,
  type CatalogOptions,
  type ImageResource,
  type ModuleVersion,
} from '@skr-watcher/oci';
import { readText, UsageError, type CliIo } from './cli-io.js';
import { readModuleConfig, type ModuleConfigFile, type TemplateExtras } from './module-config.js';

export interface ConnectionOptions {
  subpath?: string;
  credentials?: string;
  caFile?: string;
  timeout: string;
}

export interface PublishOptions extends ConnectionOptions {
  /** modulectl's module-config.yaml; flags given beside it win over its fields. */
  configFile?: string;
  registry?: string;
  name?: string;
  version?: string;
  manifest?: string;
  defaultCr?: string;
  ocmComponentName?: string;
  channel?: string[];
  mandatory?: boolean;
  image?: string[];
  requiresDowntime?: boolean;
  namespace: string;
  manager?: string;
  repositoryUrl?: string;
  documentationUrl?: string;
  output: string;
}

const SEMVER = /^v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$/;
const MODULE_NAME = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** The registry connection of a command's options (registry as --oci-registry-host takes it). */
export async function connectionOf(registry: string, options: ConnectionOptions) {
  const timeoutS = Number(options.timeout);
  if (!Number.isFinite(timeoutS) || timeoutS <= 0)
    throw new UsageError(`--timeout ${options.timeout} is not a number of seconds`);
  const config = registryConfigFromFlags({
    ociRegistryHost: registry,
    ...(options.subpath ? { modulesRepositorySubpath: options.subpath } : {}),
    ...(options.credentials
      ? { dockerConfigJson: await readText(options.credentials, '--credentials') }
      : {}),
  });
  return {
    ...config,
    ...(options.caFile ? { ca: await readText(options.caFile, '--ca-file') } : {}),
    timeoutMs: timeoutS * 1000,
  };
}

const URL_SOURCE = /^https?:\/\//i;

/** A file's text, or a URL's body (module-config.yaml may name either, as modulectl takes both). */
async function readSource(source: string, what: string, timeoutMs: number): Promise<string> {
  if (!URL_SOURCE.test(source)) return readText(source, what);
  let answer: Response;
  try {
    answer = await fetch(source, { signal: AbortSignal.timeout(timeoutMs) });
  } catch (cause) {
    throw new Error(`${what} ${source}: cannot download`, { cause });
  }
  if (!answer.ok) throw new Error(`${what} ${source}: the server answered ${answer.status}`);
  return answer.text();
}

/** The raw manifest: a file or URL as it is, or a directory's YAML files joined in name order (one file in the tar). */
async function readManifest(
  path: string,
  moduleName: string,
  timeoutMs: number,
): Promise<{ text: string; fileName: string }> {
  if (URL_SOURCE.test(path)) {
    const fileName = basename(new URL(path).pathname) || `${moduleName}.yaml`;
    return { text: await readSource(path, '--manifest', timeoutMs), fileName };
  }
  const info = await stat(path).catch((cause: NodeJS.ErrnoException) => {
    throw new UsageError(`--manifest ${path}: ${cause.code ?? cause.message}`);
  });
  if (!info.isDirectory()) return { text: await readText(path, '--manifest'), fileName: basename(path) };
  const files = (await readdir(path)).filter((f) => /\.ya?ml$/.test(f) && !f.startsWith('.')).sort();
  if (files.length === 0) throw new UsageError(`--manifest ${path}: the directory has no .yaml or .yml file`);
  const texts = await Promise.all(files.map((f) => readText(join(path, f), '--manifest')));
  return {
    text: texts.map((t) => (t.endsWith('\n') ? t : `${t}\n`)).join('---\n'),
    fileName: `${moduleName}.yaml`,
  };
}

function parseImages(values: string[]): ImageResource[] {
  return values.map((value) => {
    const at = value.indexOf('=');
    const name = value.slice(0, at);
    const imageReference = value.slice(at + 1);
    if (at <= 0 || !imageReference) throw new UsageError(`--image ${value}: give name=reference`);
    const tag = /:([^/:@]+)(@sha256:[a-f0-9]{64})?$/.exec(imageReference)?.[1];
    return { name, imageReference, version: tag ?? '0.0.0' };
  });
}

function parseManager(value: string): NonNullable<CatalogOptions['manager']> {
  const match =
    /^(?:([a-z0-9.-]+)\/)?(v[0-9a-z]+)?\/?(Deployment|StatefulSet|DaemonSet|[A-Z]\w*):(?:([a-z0-9-]+)\/)?([a-z0-9.-]+)$/.exec(
      value,
    );
  if (!match)
    throw new UsageError(
      `--manager ${value}: give Kind:namespace/name, e.g. Deployment:kyma-system/operator`,
    );
  const [, group, version, kind, namespace, name] = match;
  const apps = kind === 'Deployment' || kind === 'StatefulSet' || kind === 'DaemonSet';
  return {
    group: group ?? (apps ? 'apps' : ''),
    version: version ?? 'v1',
    kind: kind!,
    name: name!,
    ...(namespace ? { namespace } : {}),
  };
}

/** The ModuleTemplate with what module-config.yaml adds to it; publishing's own labels and fields stay. */
function withTemplateExtras(
  template: CatalogObject,
  extras: TemplateExtras,
  manifest: string,
): CatalogObject {
  const resources = extras.resources ?? [];
  if (URL_SOURCE.test(manifest) && !resources.some((r) => r.name === 'raw-manifest'))
    resources.push({ name: 'raw-manifest', link: manifest });
  const info = template.spec['info'] as Record<string, unknown>;
  return {
    ...template,
    metadata: {
      ...template.metadata,
      labels: { ...extras.labels, ...template.metadata.labels },
      annotations: { ...extras.annotations, ...template.metadata.annotations },
    },
    spec: {
      ...template.spec,
      ...(extras.icons ? { info: { ...info, icons: extras.icons } } : {}),
      ...(resources.length > 0 ? { resources } : {}),
      ...(extras.associatedResources ? { associatedResources: extras.associatedResources } : {}),
    },
  };
}

/** A value given on the command line wins; else module-config.yaml's; else the flag's default. */
type Given = (option: keyof PublishOptions) => boolean;

function required<T>(value: T | undefined, flag: string, field: string): T {
  if (value === undefined) throw new UsageError(`${flag} is required (or ${field} in --config-file)`);
  return value;
}

/**
 * Publishes from flags, from modulectl's module-config.yaml (`--config-file`), or both: `given(option)` says which
 * options the command line set (not a default), those win over the file.
 */
export async function publish(options: PublishOptions, io: CliIo, given: Given = () => true): Promise<void> {
  const config: ModuleConfigFile | undefined = options.configFile
    ? await readModuleConfig(options.configFile)
    : undefined;
  if (config && config.unread.length > 0)
    io.stderr.write(
      `warning: --config-file ${options.configFile}: ${config.unread.join(', ')} not read by skr-modules publish\n`,
    );
  const pick = <K extends keyof PublishOptions>(key: K, fromConfig: PublishOptions[K] | undefined) =>
    given(key) || fromConfig === undefined ? options[key] : fromConfig;
  const registry = options.registry;
  if (!registry)
    throw new UsageError('--registry is required (a flag also with --config-file, as for modulectl)');
  const name = required(pick('name', config?.moduleName), '--name', 'name');
  const version = required(pick('version', config?.version), '--version', 'version');
  const manifestSource = required(pick('manifest', config?.manifest), '--manifest', 'manifest');
  const defaultCrSource = pick('defaultCr', config?.defaultCr);
  const channels = pick('channel', config?.channels);
  const mandatory = pick('mandatory', config?.mandatory);
  const output = options.output;
  if (!MODULE_NAME.test(name)) {
    throw new UsageError(`--name ${name}: a module name is lower case letters, digits and '-'`);
  }
  if (!SEMVER.test(version)) throw new UsageError(`--version ${version} is not a semantic version`);
  if (output !== 'yaml' && output !== 'json')
    throw new UsageError(
      /\.(ya?ml|json)$/.test(output)
        ? `--output ${output}: the format, yaml or json; the catalog goes to stdout (redirect it: > ${output})`
        : '--output is yaml or json',
    );
  if (mandatory && channels) throw new UsageError('--mandatory and --channel exclude each other');
  const connection = await connectionOf(registry, options);
  const manifest = await readManifest(manifestSource, name, connection.timeoutMs);
  // The same checks the agent applies when it installs the module: refuse now what it would refuse later.
  const objects = parseManifestObjects(manifest.text, `--manifest ${manifestSource}`);
  if (objects.length === 0) throw new UsageError(`--manifest ${manifestSource} holds no object`);
  let defaultCr: string | undefined;
  if (defaultCrSource) {
    defaultCr = await readSource(defaultCrSource, '--default-cr', connection.timeoutMs);
    const documents = parseAllDocuments(defaultCr).filter((d) => d.contents !== null);
    const cr = documents.length === 1 ? (parse(defaultCr) as Record<string, unknown> | null) : undefined;
    if (!cr || typeof cr['apiVersion'] !== 'string' || typeof cr['kind'] !== 'string') {
      throw new UsageError(`--default-cr ${defaultCrSource}: give one object with apiVersion and kind`);
    }
  }
  const images = given('image') && options.image ? parseImages(options.image) : config?.images;
  const requiresDowntime = pick('requiresDowntime', config?.requiresDowntime);
  const module: ModuleVersion = {
    moduleName: name,
    version,
    ocmComponentName: pick('ocmComponentName', config?.ocmComponentName) ?? `kyma-project.io/module/${name}`,
    rawManifest: manifest.text,
    rawManifestFileName: manifest.fileName,
    ...(defaultCr === undefined ? {} : { defaultCr }),
    ...(channels ? { channels } : {}),
    ...(mandatory ? { mandatory: true } : {}),
    ...(requiresDowntime ? { requiresDowntime: true } : {}),
    ...(images ? { images } : {}),
  };
  const manager = given('manager') && options.manager ? parseManager(options.manager) : config?.manager;
  const repository = pick('repositoryUrl', config?.repository);
  const documentation = pick('documentationUrl', config?.documentation);
  const published = await publishModule(connection, module, {
    namespace: pick('namespace', config?.namespace) ?? 'kcp-system',
    ...(manager ? { manager } : {}),
    ...(repository ? { repository } : {}),
    ...(documentation ? { documentation } : {}),
  });
  const raw = published.component.layers.find((l) => l.name === 'raw-manifest');
  io.stderr.write(
    `published ${module.ocmComponentName}:${module.version} to ${connection.location.reference} ` +
      `(${objects.length} objects; manifest ${published.component.manifestDigest}; raw-manifest ${raw?.digest})\n`,
  );
  const template = config
    ? withTemplateExtras(published.moduleTemplate, config.template, manifestSource)
    : published.moduleTemplate;
  const documents = [template, published.moduleReleaseMeta];
  io.stdout.write(
    output === 'json'
      ? `${JSON.stringify({ apiVersion: 'v1', kind: 'List', items: documents }, null, 2)}\n`
      : documents.map((d) => stringify(d)).join('---\n'),
  );
}
