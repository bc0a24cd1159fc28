// A CPU profile of another node process over a chosen window, through its inspector (started with
// --inspect=127.0.0.1:<port>), and a summary by function and by package: where a bench's phase spends its CPU.

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

export interface CpuProfile {
  nodes: { id: number; callFrame: CallFrame }[];
  samples?: number[];
  timeDeltas?: number[];
}

/** Starts sampling (every 500 µs) in the process whose inspector listens on `port`; stop() returns the profile. */
export async function startCpuProfile(port: number): Promise<{ stop(): Promise<CpuProfile> }> {
  const targets = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as {
    webSocketDebuggerUrl: string;
  }[];
  const url = targets[0]?.webSocketDebuggerUrl;
  if (!url) throw new Error(`no inspector target on 127.0.0.1:${port}`);
  const socket = new WebSocket(url);
  await new Promise((resolve, reject) => {
    socket.addEventListener('open', resolve, { once: true });
    socket.addEventListener('error', reject, { once: true });
  });
  let next = 0;
  const pending = new Map<number, (result: unknown) => void>();
  socket.addEventListener('message', (message) => {
    const answer = JSON.parse(String(message.data)) as { id?: number; result?: unknown };
    if (answer.id !== undefined) pending.get(answer.id)?.(answer.result);
  });
  const call = (method: string, params: Record<string, unknown> = {}) =>
    new Promise<unknown>((resolve) => {
      next += 1;
      pending.set(next, resolve);
      socket.send(JSON.stringify({ id: next, method, params }));
    });
  await call('Profiler.enable');
  await call('Profiler.setSamplingInterval', { interval: 500 });
  await call('Profiler.start');
  return {
    async stop() {
      const { profile } = (await call('Profiler.stop')) as { profile: CpuProfile };
      socket.close();
      return profile;
    },
  };
}

/** Where a script belongs: its npm package, node's internals, or this repository's folder. */
function packageOf(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (!url) return functionName || '(native)';
  if (url.startsWith('node:')) return 'node:internal';
  const modules = url.lastIndexOf('node_modules/');
  if (modules >= 0) {
    const parts = url.slice(modules + 'node_modules/'.length).split('/');
    return parts[0]?.startsWith('@') ? `${parts[0]}/${parts[1]}` : (parts[0] ?? url);
  }
  const repo = /\/(agent|packages\/[^/]+|webhook)\/(?:dist|src)\/(.*)$/.exec(url);
  return repo ? `${repo[1]}/${repo[2]}` : url;
}

/** Self time by function and by package, largest first (ms and share of the sampled time). */
export function summariseCpuProfile(profile: CpuProfile, top = 25): string {
  const byNode = new Map(profile.nodes.map((node) => [node.id, node.callFrame]));
  const self = new Map<number, number>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  let total = 0;
  for (let i = 0; i < samples.length; i++) {
    // A sample's time is the delta to the next sample.
    const us = deltas[i + 1] ?? 0;
    self.set(samples[i] as number, (self.get(samples[i] as number) ?? 0) + us);
    total += us;
  }
  const add = (map: Map<string, number>, key: string, us: number) => map.set(key, (map.get(key) ?? 0) + us);
  const byFunction = new Map<string, number>();
  const byPackage = new Map<string, number>();
  for (const [id, us] of self) {
    const frame = byNode.get(id);
    if (!frame) continue;
    const where = frame.url ? `${packageOf(frame)}:${frame.lineNumber + 1}` : '';
    add(byFunction, `${frame.functionName || '(anonymous)'} ${where}`.trim(), us);
    add(byPackage, packageOf(frame), us);
  }
  const lines = (map: Map<string, number>) =>
    [...map]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(
        ([key, us]) =>
          `    ${(us / 1000).toFixed(0).padStart(6)} ms ${((100 * us) / total).toFixed(1).padStart(5)} %  ${key}`,
      );
  return [
    `  CPU profile: ${(total / 1000).toFixed(0)} ms sampled; self time by package:`,
    ...lines(byPackage),
    '  by function:',
    ...lines(byFunction),
  ].join('\n');
}
