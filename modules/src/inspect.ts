// `skr-modules inspect`: the module components of a registry, the versions of one, or what one version holds.
import {
  COMPONENT_DESCRIPTORS,
  componentRepository,
  createModuleSource,
  RegistryClient,
  type ResolvedModule,
} from '@skr-watcher/oci';
import { connectionOf, type ConnectionOptions } from './publish.js';
import { UsageError, type CliIo } from './cli-io.js';

/** Versions in numeric order (1.2.0 before 1.10.0). */
const byVersion = (a: string, b: string) => a.localeCompare(b, 'en', { numeric: true });

export interface InspectOptions extends ConnectionOptions {
  output: string;
}

/** `name:version` → both; a `:` before the last `/` belongs to the name (there is none in OCM names anyway). */
function splitComponent(value: string): { name: string; version?: string } {
  const colon = value.lastIndexOf(':');
  return colon > value.lastIndexOf('/')
    ? { name: value.slice(0, colon), version: value.slice(colon + 1) }
    : { name: value };
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return (
    rows
      .map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  '))
      .join('\n') + '\n'
  );
}

function describeVersion(
  resolved: ResolvedModule,
  objects: { kind: string; metadata: { name: string; namespace?: string } }[],
): string {
  const lines = [
    `component:       ${resolved.componentName}`,
    `version:         ${resolved.version} (descriptor ${resolved.descriptor.schema})`,
    `manifest digest: ${resolved.manifestDigest}`,
    `install source:  ${JSON.stringify(resolved.install.source)}`,
    `localizedImages: ${resolved.localizedImages.length ? resolved.localizedImages.join(', ') : '(none)'}`,
    '',
    'resources:',
    table([
      ['NAME', 'ACCESS', 'MEDIA TYPE', 'REFERENCE'],
      ...resolved.descriptor.resources.map((r) => [
        r.name,
        r.access.type,
        r.access.mediaType ?? '-',
        r.access.localReference ?? r.access.imageReference ?? '-',
      ]),
    ]).trimEnd(),
    '',
    `raw manifest (${objects.length} objects):`,
    table([
      ['KIND', 'NAMESPACE', 'NAME'],
      ...objects.map((o) => [o.kind, o.metadata.namespace ?? '-', o.metadata.name]),
    ]).trimEnd(),
  ];
  return `${lines.join('\n')}\n`;
}

export async function inspect(
  registry: string,
  component: string | undefined,
  options: InspectOptions,
  io: CliIo,
): Promise<void> {
  if (options.output !== 'text' && options.output !== 'json')
    throw new UsageError('--output is text or json');
  const connection = await connectionOf(registry, options);
  const json = options.output === 'json';
  const client = new RegistryClient({
    host: connection.location.host,
    insecure: connection.location.insecure,
    timeoutMs: connection.timeoutMs,
    ...(connection.credentials ? { credentials: connection.credentials } : {}),
    ...(connection.ca ? { ca: connection.ca } : {}),
  });
  try {
    if (component === undefined) {
      const prefix = `${componentRepository(connection.location.basePath, '')}/`;
      const names = (await client.catalog())
        .filter((repository) => repository.startsWith(prefix) && repository.length > prefix.length)
        .map((repository) => repository.slice(prefix.length))
        .sort();
      const rows = await Promise.all(
        names.map(async (name) => ({
          name,
          versions: (await client.tags(componentRepository(connection.location.basePath, name))).sort(
            byVersion,
          ),
        })),
      );
      if (json)
        io.stdout.write(
          `${JSON.stringify({ registry: connection.location.reference, components: rows }, null, 2)}\n`,
        );
      else if (rows.length === 0) {
        io.stdout.write(
          `no module components under ${connection.location.reference}/${COMPONENT_DESCRIPTORS}/\n`,
        );
      } else
        io.stdout.write(
          table([['COMPONENT', 'VERSIONS'], ...rows.map((r) => [r.name, r.versions.join(', ')])]),
        );
      return;
    }
    const { name, version } = splitComponent(component);
    if (version === undefined) {
      const versions = (await client.tags(componentRepository(connection.location.basePath, name))).sort(
        byVersion,
      );
      if (versions.length === 0) {
        throw new Error(
          `${name}: no versions under ${connection.location.reference}/${COMPONENT_DESCRIPTORS}/`,
        );
      }
      io.stdout.write(
        json ? `${JSON.stringify({ component: name, versions }, null, 2)}\n` : `${versions.join('\n')}\n`,
      );
      return;
    }
    const source = createModuleSource(connection);
    try {
      const resolved = await source.resolve(name, version);
      const objects = await source.rawManifestObjects(resolved.install.source);
      io.stdout.write(
        json
          ? `${JSON.stringify({ ...resolved, objects: objects.map((o) => ({ apiVersion: o.apiVersion, kind: o.kind, namespace: o.metadata.namespace, name: o.metadata.name })) }, null, 2)}\n`
          : describeVersion(resolved, objects),
      );
    } finally {
      await source.close();
    }
  } finally {
    await client.close();
  }
}
