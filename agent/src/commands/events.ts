// skr-agent events: tail the callbacks a running agent accepts, from its live event stream.
import { Command } from 'commander';
import { ConfigError, parseAddress } from '../config.js';
import { EVENT_STREAM_ADDRESS, EVENT_STREAM_PATH, formatStreamedEvent, tailEvents } from '../event-stream.js';

export function eventsCommand(): Command {
  return new Command('events')
    .description('tail the callbacks the agent accepts: time, runtime-id, kind, namespace/name')
    .option('--address <host:port>', "the agent's --events-address", EVENT_STREAM_ADDRESS)
    .option('-o, --output <format>', 'text or json (one object per line)', 'text')
    .action(async (flags: { address: string; output: string }) => {
      if (flags.output !== 'text' && flags.output !== 'json') {
        throw new ConfigError(`--output: expected text or json, got ${JSON.stringify(flags.output)}`);
      }
      const address = parseAddress('--address', flags.address);
      const url = `ws://${address.host ?? '127.0.0.1'}:${address.port}${EVENT_STREAM_PATH}`;
      const abort = new AbortController();
      process.once('SIGINT', () => abort.abort());
      process.once('SIGTERM', () => abort.abort());
      await tailEvents(
        url,
        (event) =>
          process.stdout.write(
            `${flags.output === 'json' ? JSON.stringify(event) : formatStreamedEvent(event)}\n`,
          ),
        { signal: abort.signal, onOpen: () => process.stderr.write(`watching ${url} (Ctrl-C stops)\n`) },
      );
    });
}
