// How manifests/kcp/agent.yaml runs the agent container, for benches that start the agent as a process: the
// figures they print are then those of the shipped settings, not of a copy that drifted from them.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';

const MANIFEST = new URL('../../manifests/kcp/agent.yaml', import.meta.url);

interface EnvVar {
  name: string;
  value?: string;
}

interface Container {
  name: string;
  command?: string[];
  args?: string[];
  env?: EnvVar[];
}

function agentContainer(): Container {
  for (const doc of parseAllDocuments(readFileSync(MANIFEST, 'utf8'))) {
    const object = doc.toJS() as {
      kind?: string;
      spec?: { template?: { spec?: { containers?: Container[] } } };
    } | null;
    if (object?.kind !== 'Deployment') continue;
    const agent = object.spec?.template?.spec?.containers?.find((container) => container.name === 'agent');
    if (agent) return agent;
  }
  throw new Error(`${MANIFEST.pathname} has no Deployment with a container named agent`);
}

/** The literal environment variables of the agent container (those taken from the Pod's fields are left out). */
export function shippedAgentEnv(): Record<string, string> {
  return Object.fromEntries(
    (agentContainer().env ?? []).flatMap((variable) =>
      variable.value === undefined ? [] : [[variable.name, variable.value]],
    ),
  );
}

const DOCKERFILE = new URL('../../Dockerfile', import.meta.url);

/**
 * The script the agent container runs: the image's entrypoint, skr-agent, which the Dockerfile links to a script
 * (the image's working directory is the repository root). The container sets no command of its own.
 */
export function shippedAgentScript(): string {
  const dockerfile = readFileSync(DOCKERFILE, 'utf8');
  if (!/^ENTRYPOINT \["skr-agent"\]$/m.test(dockerfile))
    throw new Error(`${DOCKERFILE.pathname}: the entrypoint is not skr-agent`);
  const script = /\['skr-agent', '([^']+\.c?js)'\]/.exec(dockerfile)?.[1];
  if (!script) throw new Error(`${DOCKERFILE.pathname}: no link that makes skr-agent a script`);
  if (agentContainer().command)
    throw new Error(`${MANIFEST.pathname}: the agent container sets a command of its own`);
  return fileURLToPath(new URL(`../../${script}`, import.meta.url));
}
