import { createServer as createHttpServer, request, Agent, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { expect } from 'chai';
import { createCa, issueLeaf } from '@skr-watcher/pki';
import { answerAndClose, closeGracefully, limitConnections, tlsConnectionOptions } from '../src/index.js';

function listen(server: Server): Promise<number> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)),
  );
}

/** Resolves when the peer closes `socket`; rejects after `boundMs` so a leak fails the test, not the run. */
function closedByServer(socket: Socket, boundMs = 10_000): Promise<string> {
  return new Promise((resolve, reject) => {
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
    socket.on('error', () => undefined);
    const timer = setTimeout(
      () => reject(new Error(`the server kept the socket open for ${boundMs} ms`)),
      boundMs,
    );
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(received);
    });
  });
}

function tcp(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

describe('telemetry connections', () => {
  it('limitConnections closes connections over the cap on accept and reports each', async () => {
    let refused = 0;
    const server = createHttpServer((_req, res) => res.end('ok'));
    limitConnections(server, { maxConnections: 1, idleTimeoutMs: 30_000 }, { refused: () => refused++ });
    const accepted = new Promise<void>((resolve) => server.once('connection', () => resolve()));
    const port = await listen(server);
    const first = await tcp(port);
    await accepted;
    try {
      const second = await tcp(port);
      expect(await closedByServer(second)).to.equal('');
      expect(refused).to.equal(1);
      expect(first.destroyed).to.equal(false);
    } finally {
      first.destroy();
      await closeGracefully(server, 0);
    }
  });

  it('a TLS peer that never sends a ClientHello is cut after the idle bound and its socket destroyed', async () => {
    const ca = createCa({ commonName: 'telemetry-test-ca', keyBits: 2048, validityDays: 1 });
    const leaf = issueLeaf({
      ca,
      runtimeId: 'server',
      dnsNames: ['localhost'],
      ipAddresses: ['127.0.0.1'],
      keyBits: 2048,
      validityDays: 1,
    });
    const limits = { maxConnections: 10, idleTimeoutMs: 300 };
    const server = createHttpsServer(
      { cert: leaf.certPem, key: leaf.keyPem, ...tlsConnectionOptions(limits) },
      (_req, res) => res.end('ok'),
    );
    const failures: string[] = [];
    let silentClosed = 0;
    limitConnections(server, limits, {
      handshakeFailed: (error) => failures.push(error.message),
      silentClosed: () => silentClosed++,
    });
    const port = await listen(server);
    try {
      const silent = await tcp(port);
      await closedByServer(silent);
      // Cut before TLS began: no handshake failed, no OpenSSL state was made for it.
      expect(failures).to.have.length(0);
      expect(silentClosed).to.equal(1);
      const open = await new Promise<number>((resolve) => server.getConnections((_e, n) => resolve(n)));
      expect(open).to.equal(0);
    } finally {
      await closeGracefully(server, 0);
    }
  });

  it('answerAndClose answers malformed HTTP and closes, although the peer keeps its side open', async () => {
    const server = createHttpServer((_req, res) => res.end('ok'));
    server.on('clientError', (_error, socket) =>
      answerAndClose(socket, 'HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n'),
    );
    const port = await listen(server);
    try {
      const socket = await tcp(port);
      socket.write('NOT HTTP AT ALL\r\n\r\n');
      expect(await closedByServer(socket)).to.match(/^HTTP\/1\.1 400 Bad Request\r\n/);
    } finally {
      await closeGracefully(server, 0);
    }
  });

  it('closeGracefully closes idle kept-alive connections at once and lets a request in flight finish', async () => {
    let release: () => void = () => undefined;
    let slowArrived: () => void = () => undefined;
    const arrived = new Promise<void>((resolve) => (slowArrived = resolve));
    const server = createHttpServer((req, res) => {
      if (req.url !== '/slow') {
        res.end('quick');
        return;
      }
      release = () => res.end('finished');
      slowArrived();
    });
    const port = await listen(server);
    const idleAgent = new Agent({ keepAlive: true });
    const busyAgent = new Agent({ keepAlive: true });
    const get = (path: string, agent: Agent): Promise<string> =>
      new Promise((resolve, reject) => {
        request({ host: '127.0.0.1', port, path, agent }, (res) => {
          let body = '';
          res.on('data', (chunk: Buffer) => (body += chunk.toString()));
          res.on('end', () => resolve(body));
        })
          .on('error', reject)
          .end();
      });
    try {
      expect(await get('/quick', idleAgent)).to.equal('quick');
      const idleSocket = Object.values(idleAgent.freeSockets).flat()[0] as Socket;
      const idleClosed = closedByServer(idleSocket);
      const slow = get('/slow', busyAgent);
      await arrived;
      const closed = closeGracefully(server, 30_000);
      await idleClosed;
      release();
      expect(await slow).to.equal('finished');
      await closed;
    } finally {
      idleAgent.destroy();
      busyAgent.destroy();
    }
  });

  it('closeGracefully cuts a request that outlives the grace', async () => {
    const server = createHttpServer(() => undefined);
    const port = await listen(server);
    const hung = new Promise<string>((resolve) => {
      request({ host: '127.0.0.1', port, path: '/hang', agent: false }, () => resolve('answered'))
        .on('error', (error) => resolve(error.message))
        .end();
    });
    await new Promise<void>((resolve) => server.once('request', () => resolve()));
    await closeGracefully(server, 50);
    expect(await hung).to.equal('socket hang up');
  });
});
