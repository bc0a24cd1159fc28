// How manifests/kcp/agent.yaml runs the agent container, for benches that start the agent as a process: the
// figures they print are then those of the shipped settings, not of a copy that drifted from them.
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';

const MANIFEST = new URL('../../manifests/kcp/agent.yaml', import.meta.url);

interface EnvVar {
  name: string;
  value?: string;
}

/** The literal environment variables of the agent container (those taken from the Pod's fields are left out). */
export function shippedAgentEnv(): Record<string, string> {
  for (const doc of parseAllDocuments(readFileSync(MANIFEST, 'utf8'))) {
    const object = doc.toJS() as {
      kind?: string;
      spec?: { template?: { spec?: { containers?: { name: string; env?: EnvVar[] }[] } } };
    } | null;
    if (object?.kind !== 'Deployment') continue;
    const agent = object.spec?.template?.spec?.containers?.find((container) => container.name === 'agent');
    if (!agent) break;
    return Object.fromEntries(
      (agent.env ?? []).flatMap((variable) =>
        variable.value === undefined ? [] : [[variable.name, variable.value]],
      ),
    );
  }
  throw new Error(`${MANIFEST.pathname} has no Deployment with a container named agent`);
}
