// modulectl's module-config.yaml, read as `modulectl create --config-file` reads it, so a team publishes the same
// file with either tool: `name` is the OCM component name (kyma-project.io/module/<module>), `manifest` and
// `defaultCR` are local files (relative to the working directory, as modulectl resolves them) or http(s) URLs,
// `security` names the scanners' file whose `bdba` images become the version's image resources.
import { parse } from 'yaml';
import type { CatalogOptions, ImageResource } from '@skr-watcher/oci';
import { readText, UsageError } from './cli-io.js';

type Gvk = { group: string; version: string; kind: string };

/** What a module-config.yaml says, in the terms of `publish`. */
export interface ModuleConfigFile {
  moduleName: string;
  ocmComponentName: string;
  version: string;
  manifest: string;
  defaultCr?: string;
  channels?: string[];
  mandatory?: boolean;
  requiresDowntime?: boolean;
  namespace?: string;
  repository?: string;
  documentation?: string;
  manager?: NonNullable<CatalogOptions['manager']>;
  /** From the `security` file's bdba (formerly protecode) list. */
  images?: ImageResource[];
  /** What goes onto the printed ModuleTemplate beyond what publishing makes of the rest. */
  template: TemplateExtras;
  /** Keys of the file that modulectl reads elsewhere or not at all; named in a warning. */
  unread: string[];
}

export interface TemplateExtras {
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  icons?: { name: string; link: string }[];
  resources?: { name: string; link: string }[];
  associatedResources?: Gvk[];
}

const KEYS = [
  'name',
  'version',
  'manifest',
  'defaultCR',
  'channel',
  'mandatory',
  'security',
  'repository',
  'documentation',
  'icons',
  'resources',
  'manager',
  'associatedResources',
  'labels',
  'annotations',
  'requiresDowntime',
  'namespace',
  'internal',
  'beta',
] as const;

/** Labels lifecycle-manager reads on a ModuleTemplate for modulectl's `internal` and `beta`. */
const FLAG_LABELS = { internal: 'operator.kyma-project.io/internal', beta: 'operator.kyma-project.io/beta' };

class FieldReader {
  constructor(
    private readonly file: string,
    private readonly raw: Record<string, unknown>,
  ) {}

  fail(key: string, expected: string): never {
    throw new UsageError(`--config-file ${this.file}: ${key} must be ${expected}`);
  }

  string(key: string, required: true): string;
  string(key: string, required?: false): string | undefined;
  string(key: string, required = false): string | undefined {
    const value = this.raw[key];
    if (value === undefined || value === null || value === '') {
      if (required) throw new UsageError(`--config-file ${this.file}: ${key} is required`);
      return undefined;
    }
    if (typeof value !== 'string' && typeof value !== 'number') this.fail(key, 'a string');
    return String(value);
  }

  boolean(key: string): boolean | undefined {
    const value = this.raw[key];
    if (value === undefined || value === null) return undefined;
    if (typeof value !== 'boolean') this.fail(key, 'true or false');
    return value;
  }

  stringMap(key: string): Record<string, string> | undefined {
    const value = this.raw[key];
    if (value === undefined || value === null) return undefined;
    if (typeof value !== 'object' || Array.isArray(value)) this.fail(key, 'a map of strings');
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.some(([, v]) => typeof v !== 'string')) this.fail(key, 'a map of strings');
    return Object.fromEntries(entries) as Record<string, string>;
  }

  /** modulectl takes icons and resources as a list of {name, link} or as a map of name to link. */
  links(key: string): { name: string; link: string }[] | undefined {
    const value = this.raw[key];
    if (value === undefined || value === null) return undefined;
    if (!Array.isArray(value))
      return Object.entries(this.stringMap(key) ?? {}).map(([name, link]) => ({ name, link }));
    return value.map((item: unknown) => {
      const entry = item as { name?: unknown; link?: unknown } | null;
      if (typeof entry?.name !== 'string' || typeof entry.link !== 'string')
        this.fail(key, 'a list of {name, link}');
      return { name: entry.name, link: entry.link };
    });
  }

  gvk(key: string, value: unknown): Gvk {
    const gvk = value as Partial<Record<keyof Gvk, unknown>> | null;
    if (typeof gvk !== 'object' || gvk === null) this.fail(key, 'group, version and kind');
    const [group, version, kind] = [gvk.group ?? '', gvk.version, gvk.kind];
    if (
      typeof group !== 'string' ||
      typeof version !== 'string' ||
      typeof kind !== 'string' ||
      !version ||
      !kind
    )
      this.fail(key, 'group, version and kind');
    return { group, version, kind };
  }
}

/** The image resources of a security scanners file: each image of `bdba` named by its last path segment. */
function imagesOfSecurityConfig(file: string, text: string): ImageResource[] {
  let parsed: unknown;
  try {
    parsed = parse(text);
  } catch (cause) {
    throw new UsageError(`security ${file}: not YAML: ${(cause as Error).message}`);
  }
  const config = (parsed ?? {}) as { bdba?: unknown; protecode?: unknown };
  const list = config.bdba ?? config.protecode ?? [];
  if (!Array.isArray(list) || list.some((image) => typeof image !== 'string'))
    throw new UsageError(`security ${file}: bdba must be a list of image references`);
  return (list as string[]).map((imageReference) => {
    const match = /^(?:.*\/)?([^/:@]+):([^/:@]+)$/.exec(imageReference);
    if (!match) throw new UsageError(`security ${file}: ${imageReference} is not name:tag`);
    return { name: match[1]!, version: match[2]!, imageReference };
  });
}

/** Reads and checks a module-config.yaml; paths in it stay as written (resolved where they are read). */
export async function readModuleConfig(file: string): Promise<ModuleConfigFile> {
  const text = await readText(file, '--config-file');
  let raw: unknown;
  try {
    raw = parse(text);
  } catch (cause) {
    throw new UsageError(`--config-file ${file}: not YAML: ${(cause as Error).message}`);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw new UsageError(`--config-file ${file}: expected a map of module-config fields`);
  const fields = new FieldReader(file, raw as Record<string, unknown>);
  const name = fields.string('name', true);
  // modulectl's name is the component name; a bare module name gets the component name skr-modules gives it.
  const moduleName = name.slice(name.lastIndexOf('/') + 1);
  const manager = (raw as { manager?: unknown }).manager;
  const managerName = (manager as { name?: unknown } | null | undefined)?.name;
  const managerNamespace = (manager as { namespace?: unknown } | null | undefined)?.namespace;
  if (manager != null && (typeof managerName !== 'string' || !managerName))
    fields.fail('manager', 'name, group, version, kind and optionally namespace');
  const associated = (raw as { associatedResources?: unknown }).associatedResources;
  if (associated != null && !Array.isArray(associated)) fields.fail('associatedResources', 'a list of GVKs');
  const labels = { ...fields.stringMap('labels') };
  for (const key of ['internal', 'beta'] as const) if (fields.boolean(key)) labels[FLAG_LABELS[key]] = 'true';
  const security = fields.string('security');
  const channel = fields.string('channel');
  const template: TemplateExtras = {
    ...(Object.keys(labels).length > 0 ? { labels } : {}),
    ...(fields.stringMap('annotations') ? { annotations: fields.stringMap('annotations')! } : {}),
    ...(fields.links('icons') ? { icons: fields.links('icons')! } : {}),
    ...(fields.links('resources') ? { resources: fields.links('resources')! } : {}),
    ...(Array.isArray(associated)
      ? { associatedResources: associated.map((gvk) => fields.gvk('associatedResources', gvk)) }
      : {}),
  };
  return {
    moduleName,
    ocmComponentName: name.includes('/') ? name : `kyma-project.io/module/${name}`,
    version: fields.string('version', true),
    manifest: fields.string('manifest', true),
    ...optional('defaultCr', fields.string('defaultCR')),
    ...optional('channels', channel === undefined ? undefined : [channel]),
    ...optional('mandatory', fields.boolean('mandatory')),
    ...optional('requiresDowntime', fields.boolean('requiresDowntime')),
    ...optional('namespace', fields.string('namespace')),
    ...optional('repository', fields.string('repository')),
    ...optional('documentation', fields.string('documentation')),
    ...optional(
      'manager',
      manager == null
        ? undefined
        : {
            ...fields.gvk('manager', manager),
            name: managerName as string,
            ...(typeof managerNamespace === 'string' && managerNamespace
              ? { namespace: managerNamespace }
              : {}),
          },
    ),
    ...optional(
      'images',
      security === undefined
        ? undefined
        : imagesOfSecurityConfig(security, await readText(security, 'security')),
    ),
    template,
    unread: Object.keys(raw).filter((key) => !(KEYS as readonly string[]).includes(key)),
  };
}

function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}
