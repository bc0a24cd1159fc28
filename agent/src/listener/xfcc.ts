// X-Forwarded-Client-Cert (Envoy/Istio) and the RFC 4514 distinguished names inside it.
//
// Header grammar (Envoy): elements separated by `,`; each element is `key=value` pairs separated by `;`;
// a value may be double-quoted (Envoy always quotes Subject), and inside quotes `,;=` are literal and
// `\"` is a quote. Each proxy that forwards the request appends its own element, so the last element is
// the one written by the gateway in front of us; earlier elements are whatever the client sent.
import { X509Certificate } from 'node:crypto';
import type { ParseResult } from '@skr-watcher/api';

/** One XFCC element: lowercased keys (`by`, `hash`, `cert`, `chain`, `subject`, `uri`, `dns`) to values. */
export type XfccElement = ReadonlyMap<string, readonly string[]>;

const KEY = /^[A-Za-z][A-Za-z0-9_-]*$/;

function isSpace(char: string | undefined): boolean {
  return char === ' ' || char === '\t';
}

/** Parses a whole XFCC header value into its elements, in order. */
export function parseXfcc(header: string): ParseResult<XfccElement[]> {
  const elements: XfccElement[] = [];
  let current = new Map<string, string[]>();
  let i = 0;
  const n = header.length;
  const fail = (error: string): ParseResult<XfccElement[]> => ({
    ok: false,
    error: `${error} at offset ${i}`,
  });

  while (i < n) {
    while (isSpace(header[i])) i++;
    const keyStart = i;
    while (i < n && header[i] !== '=' && header[i] !== ';' && header[i] !== ',') i++;
    if (header[i] !== '=') return fail('expected key=value');
    const key = header.slice(keyStart, i).trim();
    if (!KEY.test(key)) return fail(`invalid key ${JSON.stringify(key.slice(0, 32))}`);
    i++; // '='

    let value = '';
    if (header[i] === '"') {
      i++;
      let closed = false;
      while (i < n) {
        const char = header[i] as string;
        if (char === '\\' && i + 1 < n) {
          const next = header[i + 1] as string;
          // `\"` is a quote; other escapes belong to the value (a DN's own `\,` escapes), so keep them.
          value += next === '"' ? '"' : char + next;
          i += 2;
          continue;
        }
        if (char === '"') {
          closed = true;
          i++;
          break;
        }
        value += char;
        i++;
      }
      if (!closed) return fail('unterminated quoted value');
      while (isSpace(header[i])) i++;
      if (i < n && header[i] !== ';' && header[i] !== ',')
        return fail('expected ; or , after a quoted value');
    } else {
      const valueStart = i;
      while (i < n && header[i] !== ';' && header[i] !== ',') i++;
      value = header.slice(valueStart, i).trim();
    }

    const lowered = key.toLowerCase();
    const values = current.get(lowered);
    if (values) values.push(value);
    else current.set(lowered, [value]);

    if (i >= n) break;
    if (header[i] === ',') {
      elements.push(current);
      current = new Map();
    }
    i++; // ';' or ','
    if (i >= n) return fail('dangling separator');
  }
  if (current.size === 0) return { ok: false, error: 'empty header' };
  elements.push(current);
  return { ok: true, value: elements };
}

const HEX_PAIR = /^[0-9A-Fa-f]{2}$/;
const COMMON_NAME_TYPES = new Set(['cn', 'commonname', '2.5.4.3', 'oid.2.5.4.3']);

/**
 * The values of every CN attribute in an RFC 4514 (or RFC 2253) distinguished name string, unescaped.
 * `\,` style escapes and `\C3\A9` hex escapes (UTF-8 bytes) are decoded; `#`-encoded BER values are refused
 * because a runtime-id is always a string.
 */
export function commonNamesOf(dn: string): ParseResult<string[]> {
  if (dn.startsWith('/')) return commonNamesOfOneline(dn);
  const names: string[] = [];
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let i = 0;
  const n = dn.length;
  while (i < n) {
    while (isSpace(dn[i])) i++;
    const typeStart = i;
    while (i < n && dn[i] !== '=') i++;
    if (i >= n)
      return { ok: false, error: `attribute without "=" in distinguished name at offset ${typeStart}` };
    const type = dn.slice(typeStart, i).trim().toLowerCase();
    if (type === '') return { ok: false, error: `empty attribute type at offset ${typeStart}` };
    i++; // '='
    while (isSpace(dn[i])) i++;

    const bytes: number[] = [];
    const pushText = (text: string): void => {
      for (const byte of Buffer.from(text, 'utf8')) bytes.push(byte);
    };
    let trailingSpaces = 0;
    if (dn[i] === '#')
      return { ok: false, error: `BER-encoded attribute value for ${type} is not supported` };
    if (dn[i] === '"') {
      // RFC 1779 quoting, still emitted by some proxies.
      i++;
      const start = i;
      while (i < n && dn[i] !== '"') i += dn[i] === '\\' ? 2 : 1;
      if (i >= n) return { ok: false, error: 'unterminated quoted attribute value' };
      pushText(dn.slice(start, i).replace(/\\(.)/g, '$1'));
      i++;
      while (isSpace(dn[i])) i++;
    } else {
      while (i < n && dn[i] !== ',' && dn[i] !== '+' && dn[i] !== ';') {
        const char = dn[i] as string;
        if (char === '\\') {
          const pair = dn.slice(i + 1, i + 3);
          if (HEX_PAIR.test(pair)) {
            bytes.push(Number.parseInt(pair, 16));
            i += 3;
          } else if (i + 1 < n) {
            pushText(dn[i + 1] as string);
            i += 2;
          } else {
            return { ok: false, error: 'distinguished name ends with a lone backslash' };
          }
          trailingSpaces = 0;
          continue;
        }
        pushText(char);
        trailingSpaces = char === ' ' ? trailingSpaces + 1 : 0;
        i++;
      }
    }
    if (COMMON_NAME_TYPES.has(type)) {
      try {
        names.push(decoder.decode(Uint8Array.from(bytes.slice(0, bytes.length - trailingSpaces))));
      } catch (cause) {
        return { ok: false, error: `CN is not valid UTF-8 (${(cause as Error).message})` };
      }
    }
    if (i < n) i++; // ',' '+' or ';'
  }
  return { ok: true, value: names };
}

/** OpenSSL's legacy one-line form, `/C=US/O=Acme/CN=runtime-a`, as older Envoy docs show it. */
function commonNamesOfOneline(dn: string): ParseResult<string[]> {
  const names: string[] = [];
  for (const part of dn.slice(1).split('/')) {
    const equals = part.indexOf('=');
    if (equals <= 0)
      return { ok: false, error: `attribute without "=" in ${JSON.stringify(dn.slice(0, 80))}` };
    if (COMMON_NAME_TYPES.has(part.slice(0, equals).trim().toLowerCase())) names.push(part.slice(equals + 1));
  }
  return { ok: true, value: names };
}

/**
 * A PEM header written form-encoded: Go's `url.QueryEscape` (upstream's tooling) writes a space as `+` and a `+` as
 * `%2B`, so once the header's space is a `+`, every `+` of the value is a space. Envoy's percent-encoding keeps
 * spaces as `%20`.
 */
const FORM_ENCODED_PEM = /^-----BEGIN\+/;

/** Subject CN of a URL-encoded PEM certificate, as Envoy (or upstream's Go tooling) forwards it in `Cert=`. */
function commonNameOfForwardedCert(encoded: string): ParseResult<string> {
  let certificate: X509Certificate;
  try {
    const percentEncoded = FORM_ENCODED_PEM.test(encoded) ? encoded.replace(/\+/g, ' ') : encoded;
    certificate = new X509Certificate(decodeURIComponent(percentEncoded));
  } catch (cause) {
    return { ok: false, error: `Cert is not a URL-encoded PEM certificate (${(cause as Error).message})` };
  }
  // Node prints the subject one `TYPE=value` per line with control characters escaped. Not
  // `toLegacyObject()`: on Node 22, calling it before `node:tls` is loaded breaks `tls` for the process.
  const names = certificate.subject
    .split('\n')
    .filter((line) => line.startsWith('CN='))
    .map((line) => line.slice('CN='.length));
  if (names.length !== 1 || names[0] === '') {
    return { ok: false, error: `Cert needs exactly one subject CN, found ${names.length}` };
  }
  return { ok: true, value: names[0] as string };
}

/**
 * The runtime-id a gateway vouches for: the CN of the last XFCC element (the one the gateway appended),
 * from its `Cert` (Kyma's Istio gateway forwards the certificate) or its `Subject` (Envoy's
 * `set_current_client_cert_details.subject`). With both, they must agree. The gateway verified the chain;
 * this only reads what it forwarded, which is why the peer must be a trusted proxy.
 */
export function runtimeIdFromXfcc(header: string): ParseResult<string> {
  const parsed = parseXfcc(header);
  if (!parsed.ok) return { ok: false, error: `malformed: ${parsed.error}` };
  const element = parsed.value[parsed.value.length - 1] as XfccElement;
  const certs = element.get('cert') ?? [];
  const subjects = element.get('subject') ?? [];
  if (certs.length > 1 || subjects.length > 1) {
    return { ok: false, error: "the gateway's element repeats Cert or Subject" };
  }
  let fromCert: string | undefined;
  if (certs.length === 1) {
    const cn = commonNameOfForwardedCert(certs[0] as string);
    if (!cn.ok) return cn;
    fromCert = cn.value;
  }
  let fromSubject: string | undefined;
  if (subjects.length === 1) {
    const names = commonNamesOf(subjects[0] as string);
    if (!names.ok) return { ok: false, error: `Subject: ${names.error}` };
    if (names.value.length !== 1 || names.value[0] === '') {
      return { ok: false, error: `Subject needs exactly one CN, found ${names.value.length}` };
    }
    fromSubject = names.value[0];
  }
  if (fromCert !== undefined && fromSubject !== undefined && fromCert !== fromSubject) {
    return {
      ok: false,
      error: `Cert CN ${JSON.stringify(fromCert)} and Subject CN ${JSON.stringify(fromSubject)} differ`,
    };
  }
  const runtimeId = fromCert ?? fromSubject;
  if (runtimeId === undefined)
    return { ok: false, error: "the gateway's element carries neither Cert nor Subject" };
  return { ok: true, value: runtimeId };
}
