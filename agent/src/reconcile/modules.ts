// Module resolution (DESIGN 3): the ModuleReleaseMeta named after the module gives the version of the
// channel (module channel, else Kyma channel, else `regular`) unless the module pins one; the template is
// the ModuleTemplate `<module>-<version>`. A missing channel or template fails that module only.
import { DEFAULTS, type KymaModule, type ModuleTemplate } from '@skr-watcher/api';
import { getCustomObject } from '@skr-watcher/kube';
import { refOf, type ReconcileContext } from './context.js';
import { parseModuleReleaseMeta, parseModuleTemplate, ShapeError } from './shapes.js';

export interface ResolvedModule {
  name: string;
  /** The channel used, or undefined for a pinned version. */
  channel: string | undefined;
  version: string;
  template: ModuleTemplate;
  /** Identity of the Module CR this module version manages in the SKR. */
  resource: { apiVersion: string; kind: string; name: string; namespace: string };
}

/** Why a module could not be resolved; `reason` is a CamelCase word for conditions and Events. */
export interface ModuleFailure {
  name: string;
  reason: 'ModuleReleaseMetaNotFound' | 'ChannelNotFound' | 'TemplateNotFound' | 'TemplateInvalid';
  message: string;
}

export function isModuleFailure(value: ResolvedModule | ModuleFailure): value is ModuleFailure {
  return 'reason' in value;
}

export async function resolveModule(
  ctx: ReconcileContext,
  module: KymaModule,
  kymaChannel: string | undefined,
  skrNamespace: string,
): Promise<ResolvedModule | ModuleFailure> {
  const { namespace } = ctx;
  let version = module.version;
  let channel: string | undefined;
  if (!version) {
    channel = module.channel ?? kymaChannel ?? DEFAULTS.channel;
    const raw = await getCustomObject(ctx.kcp.custom, refOf('moduleReleaseMeta', namespace, module.name));
    if (raw === undefined) {
      return {
        name: module.name,
        reason: 'ModuleReleaseMetaNotFound',
        message: `ModuleReleaseMeta ${namespace}/${module.name} not found`,
      };
    }
    let entry;
    try {
      entry = parseModuleReleaseMeta(raw, `ModuleReleaseMeta ${namespace}/${module.name}`).spec.channels.find(
        (candidate) => candidate.channel === channel,
      );
    } catch (error) {
      if (!(error instanceof ShapeError)) throw error;
      return { name: module.name, reason: 'TemplateInvalid', message: error.message };
    }
    if (!entry) {
      return {
        name: module.name,
        reason: 'ChannelNotFound',
        message: `ModuleReleaseMeta ${namespace}/${module.name} has no channel ${channel}`,
      };
    }
    version = entry.version;
  }

  const templateName = `${module.name}-${version}`;
  const raw = await getCustomObject(ctx.kcp.custom, refOf('moduleTemplate', namespace, templateName));
  if (raw === undefined) {
    return {
      name: module.name,
      reason: 'TemplateNotFound',
      message: `ModuleTemplate ${namespace}/${templateName} not found (version ${version}${channel ? `, channel ${channel}` : ''})`,
    };
  }
  let template: ModuleTemplate;
  try {
    template = parseModuleTemplate(raw, `ModuleTemplate ${namespace}/${templateName}`);
  } catch (error) {
    if (!(error instanceof ShapeError)) throw error;
    return { name: module.name, reason: 'TemplateInvalid', message: error.message };
  }
  if (template.spec.moduleName !== module.name) {
    return {
      name: module.name,
      reason: 'TemplateInvalid',
      message: `ModuleTemplate ${namespace}/${templateName} is for module ${template.spec.moduleName}`,
    };
  }
  const data = template.spec.data;
  if (!data) {
    return {
      name: module.name,
      reason: 'TemplateInvalid',
      message: `ModuleTemplate ${namespace}/${templateName} has no spec.data (the default Module CR)`,
    };
  }
  return {
    name: module.name,
    channel,
    version,
    template,
    resource: {
      apiVersion: data.apiVersion,
      kind: data.kind,
      name: data.metadata?.name ?? module.name,
      namespace: data.metadata?.namespace ?? skrNamespace,
    },
  };
}
