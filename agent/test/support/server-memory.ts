// A server process started by a test or bench answers `{ memory: true, gc?: boolean }` over its IPC channel with
// its own view of its memory (V8 heap, external buffers), so a bench can tell V8's share of RSS from native memory.
export interface ServerMemoryReport {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
}

export function answerMemoryRequests(): void {
  if (!process.send) return;
  process.on('message', (message: { memory?: boolean; gc?: boolean }) => {
    if (!message.memory) return;
    if (message.gc) (globalThis as { gc?: () => void }).gc?.();
    const { rss, heapUsed, heapTotal, external, arrayBuffers } = process.memoryUsage();
    const report: ServerMemoryReport = { rss, heapUsed, heapTotal, external, arrayBuffers };
    process.send?.(report);
  });
  // The IPC channel must not keep the process alive after SIGTERM.
  process.channel?.unref();
}
