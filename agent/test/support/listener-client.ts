// A callback client for listener tests: real HTTP(S) requests, answers parsed as the JSON they must be.
import { Agent as HttpAgent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';

export interface ClientIdentity {
  /** Client certificate and key; omitted to connect without one. */
  certPem?: string;
  keyPem?: string;
  /** CA that signed the listener's serving certificate. */
  caPem: string;
}

export interface CallbackAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  /** The parsed JSON body (`{code, reason, message}`); `undefined` when the body is not JSON. */
  json: { code?: number; reason?: string; message?: string } | undefined;
  text: string;
}

export interface CallbackRequest {
  path?: string;
  method?: string;
  /** Body to send; a Buffer is sent as is. */
  body?: string | Buffer;
  headers?: Record<string, string>;
  /** Send the body in chunks without a Content-Length (chunked transfer encoding). */
  chunked?: boolean;
}

export type CallbackAgent = HttpAgent | HttpsAgent;

export function tlsAgent(identity: ClientIdentity, options: { maxSockets?: number } = {}): HttpsAgent {
  return new HttpsAgent({
    keepAlive: true,
    maxSockets: options.maxSockets ?? 1,
    ca: identity.caPem,
    ...(identity.certPem ? { cert: identity.certPem } : {}),
    ...(identity.keyPem ? { key: identity.keyPem } : {}),
    servername: 'localhost',
  });
}

export function plainAgent(options: { localAddress?: string } = {}): HttpAgent {
  return new HttpAgent({
    keepAlive: true,
    maxSockets: 1,
    ...(options.localAddress ? { localAddress: options.localAddress } : {}),
  });
}

/** Posts a v2 event body to `/v2/lifecycle-manager/event` unless told otherwise. */
export function sendCallback(
  port: number,
  agent: CallbackAgent,
  spec: CallbackRequest = {},
): Promise<CallbackAnswer> {
  const body = spec.body ?? '';
  const headers: Record<string, string> = { 'content-type': 'application/json', ...spec.headers };
  if (!spec.chunked && headers['content-length'] === undefined)
    headers['content-length'] = String(Buffer.byteLength(body));
  const request = agent instanceof HttpsAgent ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const outgoing = request(
      {
        host: '127.0.0.1',
        port,
        path: spec.path ?? '/v2/lifecycle-manager/event',
        method: spec.method ?? 'POST',
        headers,
        agent,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('error', reject);
        response.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: CallbackAnswer['json'];
          try {
            json = JSON.parse(text) as CallbackAnswer['json'];
          } catch {
            json = undefined;
          }
          resolve({ status: response.statusCode ?? 0, headers: response.headers, json, text });
        });
      },
    );
    outgoing.on('error', reject);
    if (spec.chunked) {
      const bytes = Buffer.from(body);
      for (let offset = 0; offset < bytes.length; offset += 4096)
        outgoing.write(bytes.subarray(offset, offset + 4096));
      outgoing.end();
    } else {
      outgoing.end(body);
    }
  });
}

/** A valid v2 body for an SKR object. */
export function v2Body(name = 'sample-1', namespace = 'kyma-system'): string {
  return JSON.stringify({
    watched: { Namespace: namespace, Name: name },
    watchedGvk: { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: 'Sample' },
  });
}

/** A valid v1 body whose owner names a KCP Kyma. */
export function v1Body(owner: { namespace: string; name: string }, name = 'sample-1'): string {
  return JSON.stringify({
    owner: { Namespace: owner.namespace, Name: owner.name },
    watched: { Namespace: 'kyma-system', Name: name },
    watchedGvk: { group: 'operator.kyma-project.io', version: 'v1beta2', kind: 'Kyma' },
  });
}
