import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/**
 * The lowest port the kernel hands out as the local port of outgoing connections (Linux:
 * net.ipv4.ip_local_port_range, 32768 by default). A port of that range that is free now can be taken by any
 * connection a moment later, and a server told to listen on it seconds later (a webhook whose URL was registered
 * first) then fails with EADDRINUSE; ports below it are only ever taken by a listen.
 */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 2_048 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

const LOWEST = 10_000;
/** Ports this process handed out already: two callers never get the same one. */
const handedOut = new Set<number>();

function listenOnce(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(undefined));
    server.listen(port, '127.0.0.1', () => {
      const address = server.address();
      const bound = typeof address === 'object' && address ? address.port : undefined;
      server.close(() => resolve(bound));
    });
  });
}

/**
 * A loopback port that was free a moment ago, below the kernel's range for outgoing connections when there is room
 * (random, so concurrent test processes rarely pick the same one); else one the kernel picks.
 */
export async function freePort(): Promise<number> {
  const high = ephemeralLow() - 1;
  for (let attempt = 0; high > LOWEST && attempt < 50; attempt++) {
    const port = LOWEST + Math.floor(Math.random() * (high - LOWEST + 1));
    if (handedOut.has(port)) continue;
    if ((await listenOnce(port)) === port) {
      handedOut.add(port);
      return port;
    }
  }
  const port = await listenOnce(0);
  if (port === undefined) throw new Error('no free loopback port');
  handedOut.add(port);
  return port;
}
