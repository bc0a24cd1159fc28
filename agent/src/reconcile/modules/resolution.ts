// Module resolution with upstream lifecycle-manager's rules. A listed module resolves through the
// ModuleReleaseMeta named after it: its channel (module channel, else Kyma channel, else `regular`) gives the
// version, unless the module pins one; a mandatory module's ModuleReleaseMeta gives its version directly. The
// template is the ModuleTemplate `<module>-<version>`. Who may use a module: beta and internal modules only
// Kymas labelled for them, restricted modules (a kymaSelector) only Kymas it selects, and a module named in
// --restricted-default-modules without a kymaSelector nobody. A channel never downgrades an installed module. Every
// refusal fails that module only; a refusal of access also removes what was installed for it (upstream's
// ErrTemplateNotAllowed), and its status text is upstream's, which tools compare.
import semver from 'semver';
import {
  DEFAULTS,
  GROUP,
  isRecord,
  LABELS,
  selectsLabels,
  type Kyma,
  type KymaModule,
  type ModuleReleaseMeta,
  type ModuleTemplate,
  parseModuleReleaseMeta,
  parseModuleTemplate,
  ShapeError,
} from '@skr-watcher/api';
import { getCustomObject, parsedOnce } from '@skr-watcher/kube';
import { refOf, type ReconcileContext } from '../context.js';

export interface ResolvedModule {
  name: string;
  /** The channel used; undefined for a pinned version or a mandatory module. */
  channel: string | undefined;
  version: string;
  /** The module's OCM component name, where its ModuleReleaseMeta gives one. */
  fqdn: string | undefined;
  template: ModuleTemplate;
  /** Identity of the Module CR this module version manages in the SKR; undefined when it has none (no spec.data). */
  resource: { apiVersion: string; kind: string; name: string; namespace: string } | undefined;
  /** Resolved, but not as asked (e.g. a downgrade refused); the module is Warning with this message. */
  warning?: string;
}

/** Why a module could not be resolved; `reason` is a CamelCase word for conditions and Events. */
export interface ModuleFailure {
  name: string;
  reason:
    | 'ModuleReleaseMetaNotFound'
    | 'ChannelNotFound'
    | 'TemplateNotFound'
    | 'TemplateInvalid'
    | 'ModuleNotAllowed';
  message: string;
  /**
   * The Kyma may not use the module (upstream's ErrTemplateNotAllowed): what was installed for it is removed, and
   * `message` is upstream's status text, reported as it is; `detail` says which rule refused it.
   */
  accessDenied?: { detail: string };
  /** `message` is upstream's status text for this failure, reported as it is (tools and its e2e tests compare it). */
  upstreamText?: true;
}

export function isModuleFailure(value: ResolvedModule | ModuleFailure): value is ModuleFailure {
  return 'reason' in value;
}

export interface ResolutionInput {
  module: KymaModule;
  /** The KCP Kyma: its labels decide access to beta, internal and restricted modules. */
  kyma: Kyma;
  kymaChannel: string | undefined;
  skrNamespace: string;
  /** The version installed so far (from the Kyma status), which a channel must not go below. */
  installedVersion: string | undefined;
  /** Set for a mandatory module: its ModuleReleaseMeta, already read. */
  mandatory?: ModuleReleaseMeta;
}

const ENABLED = 'true';

/** Upstream's status text of a module the Kyma may not use (ErrTemplateNotAllowed and its wrappings). */
export const NOT_ALLOWED = {
  any: 'module template not allowed',
  beta: 'module template not allowed: beta module',
  internal: 'module template not allowed: internal module',
  restricted: 'module template not allowed: restricted module not allowed for this Kyma',
} as const;

/** Why a Kyma may not use a module: upstream's status text, and which rule refused it. */
export interface AccessRefusal {
  message: string;
  detail: string;
}

function kymaHasLabel(kyma: Kyma, label: string): boolean {
  return kyma.metadata.labels?.[label]?.toLowerCase() === ENABLED;
}

/** Why this Kyma may not use a module, or undefined when it may. */
function refusal(
  kyma: Kyma,
  flags: { beta: boolean; internal: boolean },
  what: string,
): AccessRefusal | undefined {
  if (flags.beta && !kymaHasLabel(kyma, LABELS.beta))
    return {
      message: NOT_ALLOWED.beta,
      detail: `${what} is beta; the Kyma is not labelled ${LABELS.beta}=true`,
    };
  if (flags.internal && !kymaHasLabel(kyma, LABELS.internal))
    return {
      message: NOT_ALLOWED.internal,
      detail: `${what} is internal; the Kyma is not labelled ${LABELS.internal}=true`,
    };
  return undefined;
}

const NO_MODULES: ReadonlySet<string> = new Set();

/**
 * Whether a Kyma may see a ModuleReleaseMeta (resolution and the SKR's module catalog share the rule). A module in
 * `restricted` (--restricted-default-modules) is offered only where its kymaSelector selects the Kyma: without one,
 * to nobody (upstream's rule).
 */
export function releaseMetaRefusal(
  kyma: Kyma,
  meta: ModuleReleaseMeta,
  what: string,
  restricted: ReadonlySet<string> = NO_MODULES,
): AccessRefusal | undefined {
  const access = refusal(
    kyma,
    { beta: meta.spec.beta === true, internal: meta.spec.internal === true },
    what,
  );
  if (access) return access;
  const selector = meta.spec.kymaSelector;
  if (!selector && restricted.has(meta.spec.moduleName))
    return {
      message: NOT_ALLOWED.any,
      detail: `${what} is in --restricted-default-modules and has no kymaSelector: it is offered to no Kyma`,
    };
  if (selector && !selectsLabels(selector, kyma.metadata.labels))
    return {
      message: NOT_ALLOWED.restricted,
      detail: `${what} is restricted; its kymaSelector does not select this Kyma`,
    };
  return undefined;
}

/** Whether a Kyma may see a ModuleTemplate, by its beta and internal labels. */
export function templateRefusal(
  kyma: Kyma,
  template: ModuleTemplate,
  what: string,
): AccessRefusal | undefined {
  const labels = template.metadata.labels ?? {};
  return refusal(
    kyma,
    {
      beta: labels[LABELS.beta]?.toLowerCase() === ENABLED,
      internal: labels[LABELS.internal]?.toLowerCase() === ENABLED,
    },
    what,
  );
}

/** Orders semantic versions (`1.2.3`, `1.2.3-rc1`); undefined when either is not one. */
export function compareVersions(a: string, b: string): number | undefined {
  const left = semver.parse(a);
  const right = semver.parse(b);
  if (!left || !right) return undefined;
  return semver.compare(left, right);
}

/**
 * A catalog object of the KCP namespace by name: from the controller's watch cache when it has listed (each object
 * parsed once; a template or release meta added a moment ago that the cache lacks yet enqueues the Kyma again when it
 * arrives), else read from the API server. Two GETs per module per pass were most of a no-op pass's KCP requests.
 */
async function readCatalogObject<T>(
  ctx: ReconcileContext,
  kind: 'moduleReleaseMeta' | 'moduleTemplate',
  name: string,
  parse: (raw: unknown, what: string) => T,
): Promise<T | ShapeError | undefined> {
  const what = `${kind === 'moduleTemplate' ? 'ModuleTemplate' : 'ModuleReleaseMeta'} ${ctx.namespace}/${name}`;
  const parsed = (raw: unknown): T | ShapeError => {
    try {
      return parse(raw, what);
    } catch (error) {
      if (error instanceof ShapeError) return error;
      throw error;
    }
  };
  const cached = kind === 'moduleTemplate' ? ctx.caches?.moduleTemplates() : ctx.caches?.moduleReleaseMetas();
  if (cached) {
    const raw = cached.find((item) => nameOf(item) === name);
    return raw === undefined ? undefined : parsedOnce(raw, `${kind} or ShapeError`, parsed);
  }
  const raw = await getCustomObject(ctx.kcp.custom, refOf(kind, ctx.namespace, name));
  return raw === undefined ? undefined : parsed(raw);
}

function nameOf(item: unknown): string | undefined {
  if (!isRecord(item) || !isRecord(item['metadata'])) return undefined;
  const name = item['metadata']['name'];
  return typeof name === 'string' ? name : undefined;
}

export async function resolveModule(
  ctx: ReconcileContext,
  input: ResolutionInput,
): Promise<ResolvedModule | ModuleFailure> {
  const { module, kyma, skrNamespace } = input;
  const { namespace } = ctx;
  const name = module.name;
  const fail = (reason: ModuleFailure['reason'], message: string): ModuleFailure => ({
    name,
    reason,
    message,
  });
  const denied = ({ message, detail }: AccessRefusal): ModuleFailure => ({
    name,
    reason: 'ModuleNotAllowed',
    message,
    accessDenied: { detail },
  });

  // The ModuleReleaseMeta: always for a channel; for a pinned version only its access rules apply.
  const meta =
    input.mandatory ?? (await readCatalogObject(ctx, 'moduleReleaseMeta', name, parseModuleReleaseMeta));
  if (meta instanceof ShapeError) return fail('TemplateInvalid', meta.message);
  const metaWhat = `module ${name} (ModuleReleaseMeta ${namespace}/${name})`;
  if (meta && !input.mandatory) {
    if (meta.spec.mandatory)
      return fail(
        'ModuleNotAllowed',
        `${metaWhat} is mandatory: it is installed in every Kyma without being listed`,
      );
    const refused = releaseMetaRefusal(kyma, meta, metaWhat, ctx.modules?.restrictedModules);
    if (refused) return denied(refused);
  }

  let version = input.mandatory?.spec.mandatory?.version ?? module.version;
  let channel: string | undefined;
  let warning: string | undefined;
  if (!version) {
    channel = module.channel ?? input.kymaChannel ?? DEFAULTS.channel;
    if (!meta) return fail('ModuleReleaseMetaNotFound', `ModuleReleaseMeta ${namespace}/${name} not found`);
    const entry = meta.spec.channels?.find((candidate) => candidate.channel === channel);
    if (!entry)
      return fail('ChannelNotFound', `ModuleReleaseMeta ${namespace}/${name} has no channel ${channel}`);
    version = entry.version;
    const installed = input.installedVersion;
    if (installed && (compareVersions(version, installed) ?? 0) < 0) {
      // Upstream never downgrades on a channel switch: the installed version stays until the channel catches up.
      warning = `channel ${channel} serves version ${version}, older than the installed ${installed}; downgrades are refused, ${installed} stays`;
      version = installed;
    }
  }

  const templateName = `${name}-${version}`;
  const template = await readCatalogObject(ctx, 'moduleTemplate', templateName, parseModuleTemplate);
  if (template === undefined) {
    // Upstream's words: a template under another name (an obsolete `<module>-<channel>` one) is not looked for.
    return {
      ...fail(
        'TemplateNotFound',
        `failed to get module template: ModuleTemplate.${GROUP} "${templateName}" not found`,
      ),
      upstreamText: true,
    };
  }
  if (template instanceof ShapeError) return fail('TemplateInvalid', template.message);
  const templateWhat = `ModuleTemplate ${namespace}/${templateName}`;
  if (template.spec.moduleName && template.spec.moduleName !== name)
    return fail('TemplateInvalid', `${templateWhat} is for module ${template.spec.moduleName}`);
  if (template.spec.mandatory && !input.mandatory)
    return fail('ModuleNotAllowed', `${templateWhat} is a mandatory module's template`);
  const refused = templateRefusal(kyma, template, templateWhat);
  if (refused) return denied(refused);

  const data = template.spec.data;
  return {
    name,
    channel,
    version,
    fqdn: meta?.spec.ocmComponentName,
    template,
    resource: data && {
      apiVersion: data.apiVersion,
      kind: data.kind,
      name: data.metadata?.name ?? name,
      namespace: data.metadata?.namespace ?? skrNamespace,
    },
    ...(warning ? { warning } : {}),
  };
}
