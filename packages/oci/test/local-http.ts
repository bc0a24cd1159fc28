// A plain HTTP server on 127.0.0.1 that answers as a test says and records every request it got: a registry, a
// token service or a blob store with exactly the behaviour a test needs, over real sockets.
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
}

export interface LocalHttp {
  /** host:port */
  readonly host: string;
  /** http://host:port */
  readonly url: string;
  readonly seen: SeenRequest[];
  close(): Promise<void>;
}

export async function startLocalHttp(
  answer: (request: IncomingMessage, response: ServerResponse) => void,
): Promise<LocalHttp> {
  const seen: SeenRequest[] = [];
  const server = createServer((request, response) => {
    seen.push({ method: request.method ?? '', url: request.url ?? '', headers: request.headers });
    answer(request, response);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    host,
    url: `http://${host}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
