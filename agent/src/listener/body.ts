// Reading a callback request: media type checks and a body read that stops at the limit.
import type { IncomingMessage } from 'node:http';

export type BodyRead = { ok: true; body: Buffer } | { ok: false; reason: 'too-large' | 'aborted' };

/**
 * Collects the body while it stays within `limitBytes`. Once the limit is passed nothing more is kept;
 * the rest of the stream is left to the caller (which discards it with a cap, see `discardBody`).
 */
export function readLimitedBody(request: IncomingMessage, limitBytes: number): Promise<BodyRead> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (result: BodyRead): void => {
      request.off('data', onData);
      request.off('end', onEnd);
      request.off('error', onAbort);
      request.off('close', onAbort);
      resolve(result);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limitBytes) {
        chunks.length = 0;
        request.pause();
        finish({ ok: false, reason: 'too-large' });
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void =>
      finish({ ok: true, body: chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size) });
    const onAbort = (): void => finish({ ok: false, reason: 'aborted' });
    request.on('data', onData);
    request.on('end', onEnd);
    request.on('error', onAbort);
    request.on('close', onAbort);
  });
}

/**
 * Throws away what is left of a request body so the answer reaches the client before the connection
 * closes (closing with unread bytes makes the kernel send RST, which can swallow our answer), but only up
 * to `capBytes`: a client that keeps sending past that loses its connection.
 */
export function discardBody(request: IncomingMessage, capBytes: number): void {
  if (request.complete || request.destroyed) return;
  let discarded = 0;
  request.on('data', (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > capBytes) request.socket.destroy();
  });
  request.on('error', () => undefined);
  request.resume();
}

/** `application/json`, optionally with `charset=utf-8`; anything else is 415. */
export function isJsonMediaType(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  const [mediaType = '', ...parameters] = contentType.split(';');
  if (mediaType.trim().toLowerCase() !== 'application/json') return false;
  for (const parameter of parameters) {
    const [name = '', value = ''] = parameter.split('=');
    if (name.trim().toLowerCase() !== 'charset') continue;
    const charset = value
      .trim()
      .replace(/^"(.*)"$/, '$1')
      .toLowerCase();
    if (charset !== 'utf-8' && charset !== 'utf8') return false;
  }
  return true;
}

/** We do not decompress callbacks (they are tiny); only the identity coding is accepted. */
export function isIdentityEncoding(contentEncoding: string | undefined): boolean {
  return (
    contentEncoding === undefined ||
    contentEncoding.trim() === '' ||
    contentEncoding.trim().toLowerCase() === 'identity'
  );
}
