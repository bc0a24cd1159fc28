// Where a registry may send a request on: only GETs are redirected, at most MAX_REDIRECTS hops, and only to the
// host asked or a host allowed by name (e.g. the blob storage behind a registry), so a registry cannot send the
// agent to an address of its choosing.
import type { Dispatcher } from 'undici';
import { ModuleSourceError } from './errors.js';

export const MAX_REDIRECTS = 3;

/** The redirect an answer asks for, and what the request is, for the error when it is not allowed. */
export interface RedirectAsked {
  location: string;
  status: number;
  /** The host of the URL first asked. */
  askedHost: string;
  operation: string;
}

export class RedirectPolicy {
  private readonly allowedHosts: ReadonlySet<string>;

  constructor(allowedHosts: readonly string[] = []) {
    this.allowedHosts = new Set(allowedHosts);
  }

  /** Whether an answer of `status` with `location`, to hop `hop` (from 0) of a `method` request, is followed. */
  follows(method: Dispatcher.HttpMethod, status: number, location: string | undefined, hop: number): boolean {
    return status >= 300 && status < 400 && !!location && hop < MAX_REDIRECTS && method === 'GET';
  }

  /** Where the redirect from `from` leads; a RegistryError unless that is the host asked or an allowed one. */
  next(from: URL, asked: RedirectAsked): URL {
    const next = new URL(asked.location, from);
    if (next.host !== asked.askedHost && !this.allowedHosts.has(next.host))
      throw new ModuleSourceError(
        'RegistryError',
        `registry ${from.host} redirected ${asked.operation} to ${next.host}, which is not the registry's host or an allowed redirect host`,
        { status: asked.status },
      );
    return next;
  }
}
