// Ports for servers started later (a webhook whose URL is registered before it listens): below the range the
// kernel takes local ports of outgoing connections from, so no connection can take one in between.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { expect } from 'chai';
import { freePort } from '../src/ports.js';

describe('freePort', () => {
  it('hands out distinct loopback ports below the ephemeral range, each free to listen on', async () => {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    const ports: number[] = [];
    for (let i = 0; i < 20; i++) ports.push(await freePort());
    expect(new Set(ports).size).to.equal(ports.length);
    for (const port of ports) {
      expect(port).to.be.below(low);
      await new Promise<void>((resolve, reject) => {
        const server = createServer();
        server.once('error', reject);
        server.listen(port, '127.0.0.1', () => server.close(() => resolve()));
      });
    }
  });
});
