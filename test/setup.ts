// Mocha root hooks: the shared control planes are stopped once, after the last test of the run.
import { stopSharedEnvironment } from '@skr-watcher/testenv';

export const mochaHooks = {
  async afterAll(this: Mocha.Context) {
    this.timeout(60_000);
    await stopSharedEnvironment();
  },
};
