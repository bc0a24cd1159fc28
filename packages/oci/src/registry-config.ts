// Where modules live, from upstream lifecycle-manager's flags: `--oci-registry-host` (`http://` = plain HTTP),
// `--modules-repository-subpath`, and the credentials of a `kubernetes.io/dockerconfigjson` Secret with exactly one
// `auths` entry (`--oci-registry-cred-secret`; its entry names the host when no host flag is given).
import * as z from 'zod/mini';
import './zod-messages.js';
import { ModuleSourceError } from './errors.js';

export type RegistryCredentials =
  | { readonly kind: 'basic'; readonly username: string; readonly password: string }
  | { readonly kind: 'bearer'; readonly token: string };

export interface RegistryLocation {
  /** host[:port][/path] without scheme: what a Manifest's `spec.install.source.repo` carries. */
  readonly reference: string;
  /** host[:port] */
  readonly host: string;
  /** The path below the host ('' or 'a/b'), in front of `component-descriptors/…`. */
  readonly basePath: string;
  /** Plain HTTP (`http://` in front of the host). */
  readonly insecure: boolean;
}

export interface RegistryConfig {
  readonly location: RegistryLocation;
  readonly credentials?: RegistryCredentials;
}

const dockerConfigEntrySchema = z.object({
  username: z.optional(z.string()),
  password: z.optional(z.string()),
  auth: z.optional(z.string()),
  registrytoken: z.optional(z.string()),
});

const dockerConfigSchema = z.object({
  auths: z.record(z.string(), dockerConfigEntrySchema),
});

/** Splits `http://host:5000/a/b/` into its parts; only `http://` and `https://` are schemes. */
export function parseRegistryHost(value: string): { host: string; basePath: string; insecure: boolean } {
  const trimmed = value.trim();
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(trimmed)?.[1]?.toLowerCase();
  if (scheme !== undefined && scheme !== 'http' && scheme !== 'https') {
    throw new ModuleSourceError(
      'Misconfigured',
      `registry host ${value}: scheme ${scheme} is not http or https`,
    );
  }
  const rest = scheme === undefined ? trimmed : trimmed.slice(scheme.length + 3);
  const [host = '', ...path] = rest.split('/').filter((part) => part !== '');
  if (!/^[A-Za-z0-9.-]+(:[0-9]{1,5})?$|^\[[0-9a-fA-F:]+\](:[0-9]{1,5})?$/.test(host)) {
    throw new ModuleSourceError(
      'Misconfigured',
      `registry host ${JSON.stringify(value)} has no valid host[:port]`,
    );
  }
  return { host: host.toLowerCase(), basePath: path.join('/'), insecure: scheme === 'http' };
}

function joinPath(...parts: string[]): string {
  return parts
    .flatMap((part) => part.split('/'))
    .filter((part) => part !== '')
    .join('/');
}

/** Credentials and host of a dockerconfigjson payload that must hold exactly one `auths` entry. */
export function parseDockerConfigJson(text: string): { registry: string; credentials: RegistryCredentials } {
  let parsed: z.infer<typeof dockerConfigSchema>;
  try {
    parsed = dockerConfigSchema.parse(JSON.parse(text));
  } catch (cause) {
    throw new ModuleSourceError('Misconfigured', 'registry credentials: not a dockerconfigjson with auths', {
      cause,
    });
  }
  const entries = Object.entries(parsed.auths);
  if (entries.length !== 1) {
    throw new ModuleSourceError(
      'Misconfigured',
      `registry credentials: the dockerconfigjson must have exactly one auths entry, it has ${entries.length}`,
    );
  }
  const [registry, entry] = entries[0]!;
  if (entry.registrytoken) return { registry, credentials: { kind: 'bearer', token: entry.registrytoken } };
  let { username, password } = entry;
  if ((username === undefined || password === undefined) && entry.auth) {
    const decoded = Buffer.from(entry.auth, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon > 0) [username, password] = [decoded.slice(0, colon), decoded.slice(colon + 1)];
  }
  if (!username || password === undefined) {
    throw new ModuleSourceError(
      'Misconfigured',
      `registry credentials for ${registry}: the auths entry has neither username and password nor auth`,
    );
  }
  return { registry, credentials: { kind: 'basic', username, password } };
}

export interface RegistryFlags {
  /** `--oci-registry-host` */
  ociRegistryHost?: string;
  /** `--modules-repository-subpath` */
  modulesRepositorySubpath?: string;
  /** The `.dockerconfigjson` of the `--oci-registry-cred-secret` Secret. */
  dockerConfigJson?: string;
}

/**
 * The registry modules are read from. Upstream takes the host from the credential Secret when it is given
 * instead of a host flag; both together are accepted here when they name the same host (a plain-HTTP registry
 * with credentials needs both).
 */
export function registryConfigFromFlags(flags: RegistryFlags): RegistryConfig {
  const secret =
    flags.dockerConfigJson === undefined ? undefined : parseDockerConfigJson(flags.dockerConfigJson);
  const hostValue = flags.ociRegistryHost ?? secret?.registry;
  if (!hostValue) {
    throw new ModuleSourceError(
      'Misconfigured',
      'no registry: give --oci-registry-host or a credential Secret',
    );
  }
  const parsed = parseRegistryHost(hostValue);
  if (secret && flags.ociRegistryHost) {
    const secretHost = parseRegistryHost(secret.registry).host;
    if (secretHost !== parsed.host) {
      throw new ModuleSourceError(
        'Misconfigured',
        `the credential Secret is for ${secretHost}, the registry host is ${parsed.host}`,
      );
    }
  }
  const basePath = joinPath(parsed.basePath, flags.modulesRepositorySubpath ?? '');
  return {
    location: {
      reference: joinPath(parsed.host, basePath),
      host: parsed.host,
      basePath,
      insecure: parsed.insecure,
    },
    ...(secret ? { credentials: secret.credentials } : {}),
  };
}
