// `skr-modules publish`: a module version into the registry, its ModuleTemplate and ModuleReleaseMeta out.
import { readdir, readFile, stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { parse, parseAllDocuments, stringify } from 'yaml';
import {
  parseManifestObjects,
  publishModule,
  registryConfigFromFlags,
  type CatalogOptions,
  type ImageResource,
  type ModuleVersion,
} from '@skr-watcher/oci';
import { UsageError, type CliIo } from './cli-io.js';

export interface ConnectionOptions {
  subpath?: string;
  credentials?: string;
  caFile?: string;
  timeout: string;
}

export interface PublishOptions extends ConnectionOptions {
  registry: string;
  name: string;
  version: string;
  manifest: string;
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

async function readText(path: string, what: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (cause) {
    throw new UsageError(
      `${what} ${path}: ${(cause as NodeJS.ErrnoException).code ?? (cause as Error).message}`,
    );
  }
}

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

/** The raw manifest: a file as it is, or a directory's YAML files joined in name order (one file in the tar). */
async function readManifest(path: string, moduleName: string): Promise<{ text: string; fileName: string }> {
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

export async function publish(options: PublishOptions, io: CliIo): Promise<void> {
  if (!MODULE_NAME.test(options.name)) {
    throw new UsageError(`--name ${options.name}: a module name is lower case letters, digits and '-'`);
  }
  if (!SEMVER.test(options.version))
    throw new UsageError(`--version ${options.version} is not a semantic version`);
  if (options.output !== 'yaml' && options.output !== 'json')
    throw new UsageError('--output is yaml or json');
  if (options.mandatory && options.channel)
    throw new UsageError('--mandatory and --channel exclude each other');
  const connection = await connectionOf(options.registry, options);
  const manifest = await readManifest(options.manifest, options.name);
  // The same checks the agent applies when it installs the module: refuse now what it would refuse later.
  const objects = parseManifestObjects(manifest.text, `--manifest ${options.manifest}`);
  if (objects.length === 0) throw new UsageError(`--manifest ${options.manifest} holds no object`);
  let defaultCr: string | undefined;
  if (options.defaultCr) {
    defaultCr = await readText(options.defaultCr, '--default-cr');
    const documents = parseAllDocuments(defaultCr).filter((d) => d.contents !== null);
    const cr = documents.length === 1 ? (parse(defaultCr) as Record<string, unknown> | null) : undefined;
    if (!cr || typeof cr['apiVersion'] !== 'string' || typeof cr['kind'] !== 'string') {
      throw new UsageError(`--default-cr ${options.defaultCr}: give one object with apiVersion and kind`);
    }
  }
  const module: ModuleVersion = {
    moduleName: options.name,
    version: options.version,
    ocmComponentName: options.ocmComponentName ?? `kyma-project.io/module/${options.name}`,
    rawManifest: manifest.text,
    rawManifestFileName: manifest.fileName,
    ...(defaultCr === undefined ? {} : { defaultCr }),
    ...(options.channel ? { channels: options.channel } : {}),
    ...(options.mandatory ? { mandatory: true } : {}),
    ...(options.requiresDowntime ? { requiresDowntime: true } : {}),
    ...(options.image ? { images: parseImages(options.image) } : {}),
  };
  const published = await publishModule(connection, module, {
    namespace: options.namespace,
    ...(options.manager ? { manager: parseManager(options.manager) } : {}),
    ...(options.repositoryUrl ? { repository: options.repositoryUrl } : {}),
    ...(options.documentationUrl ? { documentation: options.documentationUrl } : {}),
  });
  const raw = published.component.layers.find((l) => l.name === 'raw-manifest');
  io.stderr.write(
    `published ${module.ocmComponentName}:${module.version} to ${connection.location.reference} ` +
      `(${objects.length} objects; manifest ${published.component.manifestDigest}; raw-manifest ${raw?.digest})\n`,
  );
  const documents = [published.moduleTemplate, published.moduleReleaseMeta];
  io.stdout.write(
    options.output === 'json'
      ? `${JSON.stringify({ apiVersion: 'v1', kind: 'List', items: documents }, null, 2)}\n`
      : documents.map((d) => stringify(d)).join('---\n'),
  );
}
