// Where the agent reads modules from (decision 021): the registry of --oci-registry-host, through one
// @skr-watcher/oci module source per process (every blob digest-checked, one content-addressed cache shared by all
// Kymas, so one pull per digest). A failure is remembered per component version or raw-manifest digest and answered
// again without a request until its backoff has passed: a module that fails does not make every pass of every Kyma
// that uses it a registry request (no hot loop), and the next attempt after the backoff goes to the registry again.
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Manifest } from '@skr-watcher/api';
import {
  createModuleSource,
  isModuleSourceError,
  ModuleSourceError,
  registryConfigFromFlags,
  type InstallSource,
  type ModuleSource,
  type ModuleSourceBounds,
} from '@skr-watcher/oci';
import { Counter, registeredMetric, type Registry } from '@skr-watcher/telemetry';
import type { ModuleDescription, ModuleInstallation } from '../context.js';

/** Upstream lifecycle-manager's three flags, and our bound on what is kept in memory. */
export interface ModuleRegistrySettings {
  registryHost: string;
  repositorySubpath?: string;
  /** A kubernetes.io/dockerconfigjson Secret in the agent's namespace. */
  credSecret?: string;
  /** --skr-image-pull-secret: passed on to the passes (ModuleInstallation.skrImagePullSecret). */
  skrImagePullSecret?: string;
  cacheBytes: number;
  /** --oci-registry-redirect-hosts: where a registry redirect may lead besides the registry's host. */
  redirectHosts?: readonly string[];
  /** --restricted-default-modules: passed on to the passes (ModuleInstallation.restrictedModules). */
  restrictedModules?: readonly string[];
}

export interface RetryPolicy {
  /** First wait after a transient failure (registry down, timeout, 5xx); doubles per failure. Default 2 s. */
  transientMs: number;
  /** First wait after a failure that needs a new publish or a configuration change. Default 30 s. */
  permanentMs: number;
  /** Longest wait. Default 5 min. */
  maxMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { transientMs: 2_000, permanentMs: 30_000, maxMs: 5 * 60_000 };

/** Failures remembered at most (by key); the oldest is forgotten first. */
const MAX_REMEMBERED_FAILURES = 10_000;

export interface RegistryInstallation extends ModuleInstallation {
  readonly source: ModuleSource;
  close(): Promise<void>;
}

interface Failure {
  error: Error;
  failures: number;
  retryAt: number;
}

/**
 * Remembers failures per key: within the backoff the same error is thrown again without calling `work`. Exported for
 * unit tests; `now` is injectable.
 */
export function failureBackoff(policy: RetryPolicy = DEFAULT_RETRY, now: () => number = Date.now) {
  const failed = new Map<string, Failure>();
  return async function attempt<T>(key: string, work: () => Promise<T>): Promise<T> {
    const known = failed.get(key);
    if (known && now() < known.retryAt) throw known.error;
    try {
      const value = await work();
      failed.delete(key);
      return value;
    } catch (error) {
      const failures = (known?.failures ?? 0) + 1;
      const transient = !isModuleSourceError(error) || error.transient;
      const first = transient ? policy.transientMs : policy.permanentMs;
      const wait = Math.min(policy.maxMs, first * 2 ** Math.min(failures - 1, 20));
      failed.delete(key);
      failed.set(key, {
        error: error instanceof Error ? error : new Error(String(error)),
        failures,
        retryAt: now() + wait,
      });
      if (failed.size > MAX_REMEMBERED_FAILURES) failed.delete(failed.keys().next().value as string);
      throw error;
    }
  };
}

/** The install source of a Manifest as the module source takes it; a Manifest without one fails its module. */
function installSourceOf(manifest: Manifest): InstallSource {
  const { repo, name, ref, type } = manifest.spec.install.source;
  if (!repo || !name || !ref)
    throw new ModuleSourceError(
      'MalformedDescriptor',
      `Manifest ${manifest.metadata.name}: spec.install.source needs repo, name and ref`,
    );
  return { repo, name, ref, type: type === 'oci-dir' ? 'oci-dir' : 'oci-ref' };
}

/** Reads the credential Secret's `.dockerconfigjson` from the KCP. */
async function dockerConfigJson(kcp: KubeConfig, namespace: string, name: string): Promise<string> {
  let secret;
  try {
    secret = await kcp.makeApiClient(CoreV1Api).readNamespacedSecret({ namespace, name });
  } catch (cause) {
    throw new Error(`--oci-registry-cred-secret: cannot read Secret ${namespace}/${name}`, { cause });
  }
  const data = secret.data?.['.dockerconfigjson'];
  if (!data)
    throw new Error(
      `--oci-registry-cred-secret: Secret ${namespace}/${name} has no .dockerconfigjson (type kubernetes.io/dockerconfigjson)`,
    );
  return Buffer.from(data, 'base64').toString('utf8');
}

export interface RegistryInstallationOptions {
  settings: ModuleRegistrySettings;
  /** Where the credential Secret is read (once, at start). */
  kcp?: KubeConfig;
  namespace?: string;
  metrics?: Registry;
  retry?: Partial<RetryPolicy>;
  /** Tests: smaller bounds for hostile-registry cases. */
  bounds?: Partial<ModuleSourceBounds>;
  /** PEM of extra CAs for an HTTPS registry with a private CA. */
  ca?: string;
  now?: () => number;
}

/** The module installation of `skr-agent run --oci-registry-host`: describe for the Kyma side, objects for the Manifest. */
export async function createRegistryInstallation(
  options: RegistryInstallationOptions,
): Promise<RegistryInstallation> {
  const { settings } = options;
  let credentials: string | undefined;
  if (settings.credSecret) {
    if (!options.kcp || !options.namespace)
      throw new Error('--oci-registry-cred-secret needs the KCP to read the Secret from');
    credentials = await dockerConfigJson(options.kcp, options.namespace, settings.credSecret);
  }
  const config = registryConfigFromFlags({
    ociRegistryHost: settings.registryHost,
    ...(settings.repositorySubpath ? { modulesRepositorySubpath: settings.repositorySubpath } : {}),
    ...(credentials === undefined ? {} : { dockerConfigJson: credentials }),
  });
  const source = createModuleSource({
    ...config,
    bounds: { maxCacheBytes: settings.cacheBytes, ...options.bounds },
    ...(options.ca ? { ca: options.ca } : {}),
    ...(options.metrics ? { metrics: options.metrics } : {}),
    ...(settings.redirectHosts ? { redirectHosts: settings.redirectHosts } : {}),
  });
  const attempt = failureBackoff({ ...DEFAULT_RETRY, ...options.retry }, options.now);
  const registry = options.metrics;
  const operations = registry
    ? registeredMetric(
        registry,
        'skr_agent_module_operations_total',
        () =>
          new Counter({
            name: 'skr_agent_module_operations_total',
            help: 'Module installs, upgrades and removals finished (outcome success), and Manifest passes that ended in Error while doing one (outcome error).',
            labelNames: ['operation', 'outcome'],
            registers: [registry],
          }),
      )
    : undefined;
  return {
    source,
    ...(settings.skrImagePullSecret ? { skrImagePullSecret: settings.skrImagePullSecret } : {}),
    ...(settings.restrictedModules?.length ? { restrictedModules: new Set(settings.restrictedModules) } : {}),
    ...(operations ? { observe: (operation, outcome) => operations.inc({ operation, outcome }) } : {}),
    async describe(ocmComponentName, version): Promise<ModuleDescription> {
      const resolved = await attempt(`descriptor ${ocmComponentName}:${version}`, () =>
        source.resolve(ocmComponentName, version),
      );
      return {
        install: { name: resolved.install.name, source: { ...resolved.install.source } },
        localizedImages: [...resolved.localizedImages],
      };
    },
    async objects(manifest) {
      const install = installSourceOf(manifest);
      return attempt(`layer ${install.ref}#${install.type}`, () => source.rawManifestObjects(install));
    },
    close: () => source.close(),
  };
}
