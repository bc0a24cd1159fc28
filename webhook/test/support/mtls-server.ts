// An HTTPS server on 127.0.0.1 (a free port) that requires and verifies client certificates of the test CA and hands
// each request to `answer` once its body is read: the KCP side of the webhook's client tests.
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CertificateAndKey } from './certs.js';

export async function startMtlsServer(
  serving: CertificateAndKey,
  caPem: string,
  answer: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<Server> {
  const server = createServer(
    { cert: serving.certPem, key: serving.keyPem, ca: caPem, requestCert: true, rejectUnauthorized: true },
    (req, res) => {
      req.resume();
      req.on('end', () => answer(req, res));
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return server;
}
