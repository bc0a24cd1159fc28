// A registry's answer as the client reads it: its headers, its body within a byte bound (given up on as soon as it
// is known to be larger), the error for an answer that is not what was asked for (in the registry's own words when
// it gave some), and how a network failure reads.
import type { Dispatcher } from 'undici';
import { ModuleSourceError, type ModuleSourceReason } from './errors.js';

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Dispatcher.ResponseData['body'];
}

/** The registry an answer came from, as error messages name it. */
export interface AnsweringRegistry {
  host: string;
  /** Whether credentials were configured for it (a refusal says so when none were). */
  hasCredentials: boolean;
}

/** Bound of the body read for the words of an error answer. */
const ERROR_BODY_BYTES = 16 * 1024;

export function header(answer: Answer, name: string): string | undefined {
  const value = answer.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export function classifyNetworkError(error: unknown): { reason: ModuleSourceReason; text: string } {
  const code = (error as { code?: string }).code ?? '';
  const name = (error as Error).name ?? '';
  if (
    name === 'TimeoutError' ||
    name === 'AbortError' ||
    code === 'UND_ERR_HEADERS_TIMEOUT' ||
    code === 'UND_ERR_BODY_TIMEOUT' ||
    code === 'UND_ERR_CONNECT_TIMEOUT' ||
    code === 'UND_ERR_ABORTED'
  ) {
    return { reason: 'RegistryTimeout', text: 'did not answer in time' };
  }
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  const detail = cause?.code ?? code ?? '';
  return {
    reason: 'RegistryUnreachable',
    text: `is unreachable (${detail || (cause?.message ?? (error as Error).message)})`,
  };
}

/** Reads a body of at most `maxBytes` (`what` and `host` name it in errors), giving up as soon as it is larger. */
export async function readBounded(
  answer: Answer,
  maxBytes: number,
  what: string,
  host: string,
): Promise<Buffer> {
  const length = Number(header(answer, 'content-length'));
  if (Number.isFinite(length) && length > maxBytes) {
    answer.body.destroy();
    throw new ModuleSourceError(
      'TooLarge',
      `${what} is ${length} bytes, more than the bound of ${maxBytes} bytes`,
    );
  }
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of answer.body) {
      total += (chunk as Buffer).length;
      if (total > maxBytes) {
        answer.body.destroy();
        throw new ModuleSourceError('TooLarge', `${what} is more than the bound of ${maxBytes} bytes`);
      }
      chunks.push(chunk as Buffer);
    }
  } catch (error) {
    if (error instanceof ModuleSourceError) throw error;
    const { reason, text } = classifyNetworkError(error);
    throw new ModuleSourceError(reason, `registry ${host} ${text} while sending ${what}`, {
      cause: error,
    });
  }
  return Buffer.concat(chunks, total);
}

/** The error for an answer that is not what was asked for, with the registry's own words when it gave some. */
export async function answerFailure(
  answer: Answer,
  what: string,
  registry: AnsweringRegistry,
): Promise<ModuleSourceError> {
  let detail = '';
  try {
    const text = (await readBounded(answer, ERROR_BODY_BYTES, what, registry.host)).toString();
    const parsed = JSON.parse(text) as { errors?: { code?: string; message?: string }[] };
    detail = (parsed.errors ?? [])
      .map((e) => [e.code, e.message].filter(Boolean).join(' '))
      .filter(Boolean)
      .join('; ');
  } catch {
    // no readable body: the status says enough
  }
  const status = answer.status;
  const reason: ModuleSourceReason =
    status === 404
      ? 'NotFound'
      : status === 401 || status === 403
        ? 'Unauthorized'
        : status === 413
          ? 'TooLarge'
          : 'RegistryError';
  const words =
    status === 404
      ? 'not found'
      : status === 401 || status === 403
        ? `access refused (${status}${registry.hasCredentials ? '' : ', no credentials configured'})`
        : `answered ${status}`;
  return new ModuleSourceError(
    reason,
    `${what} at ${registry.host}: ${words}${detail ? ` (${detail})` : ''}`,
    {
      status,
    },
  );
}
