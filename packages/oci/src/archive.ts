// Blob contents: transparent gzip/zstd (as go-containerregistry's layer.Uncompressed() peeks the magic bytes) and
// tar archives read in memory with bounds. An archive with a path outside itself is refused whole.
import { posix } from 'node:path';
import zlib from 'node:zlib';
import { extract } from 'tar-stream';
import { ModuleSourceError } from './errors.js';

const GZIP_MAGIC = [0x1f, 0x8b];
const ZSTD_MAGIC = [0x28, 0xb5, 0x2f, 0xfd];

function startsWith(bytes: Buffer, magic: number[]): boolean {
  return bytes.length >= magic.length && magic.every((byte, i) => bytes[i] === byte);
}

/** The bytes, decompressed if they are gzip or zstd, at most `maxBytes` after decompression. */
export function uncompressed(bytes: Buffer, maxBytes: number, what: string): Buffer {
  try {
    if (startsWith(bytes, GZIP_MAGIC)) return zlib.gunzipSync(bytes, { maxOutputLength: maxBytes });
    if (startsWith(bytes, ZSTD_MAGIC)) {
      const zstd = (zlib as { zstdDecompressSync?: (b: Buffer, o: object) => Buffer }).zstdDecompressSync;
      if (!zstd) throw new Error('this Node.js has no zstd');
      return zstd(bytes, { maxOutputLength: maxBytes });
    }
  } catch (cause) {
    const tooLarge = (cause as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE';
    throw new ModuleSourceError(
      tooLarge ? 'TooLarge' : 'MalformedArchive',
      tooLarge
        ? `${what} decompresses to more than the bound of ${maxBytes} bytes`
        : `${what} is not valid compressed data: ${(cause as Error).message}`,
      { cause },
    );
  }
  if (bytes.length > maxBytes) {
    throw new ModuleSourceError(
      'TooLarge',
      `${what} is ${bytes.length} bytes, more than the bound of ${maxBytes}`,
    );
  }
  return bytes;
}

export interface TarFile {
  name: string;
  data: Buffer;
}

export interface TarBounds {
  /** Entries of any type. */
  maxEntries: number;
  /** Bytes of one regular file. */
  maxFileBytes: number;
}

/** Whether `name` stays inside the archive: relative, and no `..` that climbs out. */
function inside(name: string): boolean {
  if (name.startsWith('/') || /^[A-Za-z]:[\\/]/.test(name) || name.includes('\\')) return false;
  const normalized = posix.normalize(name);
  return normalized !== '..' && !normalized.startsWith('../');
}

function refusalOf(
  entry: { name: string; type?: string | null; linkname?: string | null; size?: number },
  count: number,
  bounds: TarBounds,
  what: string,
): ModuleSourceError | undefined {
  if (count > bounds.maxEntries) {
    return new ModuleSourceError('TooLarge', `${what} has more than ${bounds.maxEntries} entries`);
  }
  if (!inside(entry.name)) {
    return new ModuleSourceError(
      'MalformedArchive',
      `${what} has an entry outside itself: ${JSON.stringify(entry.name)}`,
    );
  }
  const link = entry.linkname;
  if ((entry.type === 'symlink' || entry.type === 'link') && link) {
    // A symlink is relative to its own directory, a hard link to the archive's root.
    const target = entry.type === 'symlink' ? posix.join(posix.dirname(entry.name), link) : link;
    if (link.startsWith('/') || !inside(target)) {
      return new ModuleSourceError(
        'MalformedArchive',
        `${what} has a link ${JSON.stringify(entry.name)} to outside itself: ${JSON.stringify(link)}`,
      );
    }
  }
  const regular = entry.type === 'file' || entry.type === 'contiguous-file';
  if (regular && (entry.size ?? 0) > bounds.maxFileBytes) {
    return new ModuleSourceError(
      'TooLarge',
      `${what}: ${entry.name} is ${entry.size} bytes, more than the bound of ${bounds.maxFileBytes}`,
    );
  }
  return undefined;
}

/**
 * The regular files of a tar archive, in order. Refused whole: an entry named outside the archive, a link that
 * points outside it, more than `maxEntries` entries, a file over `maxFileBytes`, or bytes that are not a tar.
 */
export async function tarFiles(bytes: Buffer, bounds: TarBounds, what: string): Promise<TarFile[]> {
  const files: TarFile[] = [];
  let entries = 0;
  // The first reason to refuse the archive; the rest of it is skipped (it is in memory and bounded already).
  let refusal: ModuleSourceError | undefined;
  const reader = extract();
  const done = new Promise<void>((resolve, reject) => {
    reader.on('entry', (entry, stream, next) => {
      entries++;
      const skip = () => {
        stream.on('end', next);
        stream.resume();
      };
      if (refusal) return skip();
      refusal = refusalOf(entry, entries, bounds, what);
      if (refusal) return skip();
      const regular = entry.type === 'file' || entry.type === 'contiguous-file';
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: unknown) => {
        if (regular) chunks.push(chunk as Buffer);
      });
      stream.on('end', () => {
        if (regular) files.push({ name: entry.name, data: Buffer.concat(chunks) });
        next();
      });
    });
    reader.on('finish', resolve);
    reader.on('error', reject);
  });
  reader.end(bytes);
  try {
    await done;
  } catch (error) {
    throw new ModuleSourceError(
      'MalformedArchive',
      `${what} is not a valid tar archive: ${(error as Error).message}`,
      {
        cause: error,
      },
    );
  }
  if (refusal) throw refusal;
  return files;
}

/** The first regular file that is not AppleDouble metadata (`._*`), as upstream takes a raw manifest from a tar. */
export function firstRegularFile(files: TarFile[], what: string): TarFile {
  const file = files.find((f) => !posix.basename(f.name).startsWith('._'));
  if (!file)
    throw new ModuleSourceError('MalformedArchive', `${what} is a tar archive without a regular file`);
  return file;
}
