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

/** The script the agent container runs (its first argument; the image's working directory is the repository root). */
export function shippedAgentScript(): string {
  const script = agentContainer().args?.[0];
  if (!script?.endsWith('.js'))
    throw new Error(`${MANIFEST.pathname}: the agent's first argument is not a script`);
  return fileURLToPath(new URL(`../../${script}`, import.meta.url));
}
