// Graceful shutdown: on SIGTERM or SIGINT run the registered steps (last registered first), then exit.
import type { Logger } from 'pino';

export type ShutdownStep = { name: string; run: () => Promise<void> };

export interface Shutdown {
  /** Adds a step; steps run in reverse order of registration (servers stop before their queues drain). */
  add(name: string, run: () => Promise<void>): void;
  /** Runs the steps now; used by the signal handlers and by tests. */
  run(reason: string): Promise<void>;
  readonly stopping: boolean;
}

export function createShutdown(options: { logger: Logger; timeoutMs?: number; exit?: boolean }): Shutdown {
  const steps: ShutdownStep[] = [];
  let running: Promise<void> | undefined;
  const timeoutMs = options.timeoutMs ?? 30_000;

  const run = (reason: string): Promise<void> => {
    running ??= (async () => {
      options.logger.info({ reason }, 'shutting down');
      const timer = setTimeout(() => {
        options.logger.error({ timeoutMs }, 'shutdown took too long; exiting');
        process.exit(1);
      }, timeoutMs);
      timer.unref();
      for (const step of [...steps].reverse()) {
        try {
          await step.run();
        } catch (error) {
          options.logger.error({ err: error, step: step.name }, 'shutdown step failed');
        }
      }
      clearTimeout(timer);
      options.logger.info('stopped');
    })();
    return running;
  };

  if (options.exit !== false) {
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      process.once(signal, () => {
        void run(signal).then(() => process.exit(0));
      });
    }
  }

  return {
    add: (name, step) => steps.push({ name, run: step }),
    run,
    get stopping() {
      return running !== undefined;
    },
  };
}
