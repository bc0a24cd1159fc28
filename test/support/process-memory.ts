// What the kernel says about another process's CPU, memory and sockets (Linux /proc), for the agent benches: the
// CPU it used, the part of RSS that is not V8's heap (malloc arenas, TLS state, thread stacks) and the connections
// it holds.
import { readFileSync } from 'node:fs';
import { readFile, readdir, readlink } from 'node:fs/promises';

/** CPU seconds (user + system) a process has used so far, from /proc; 0 when it is gone. */
export function cpuSeconds(pid: number): number {
  try {
    // Fields after the command name: state is the 1st, utime the 12th, stime the 13th (clock ticks of 10 ms).
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

export interface NativeMemory {
  /** Resident set (kB). */
  rssKb: number;
  /** Anonymous resident memory (kB): V8's heap, malloc arenas, stacks. */
  anonKb: number;
  /** Resident pages of mapped files (kB): the node binary, shared libraries. */
  fileKb: number;
  /** Resident memory of the main malloc arena (`[heap]`, brk), kB. */
  brkHeapKb: number;
  /** Anonymous mappings of 64 MB reserve, kB resident: glibc's per-thread malloc arenas (and V8 code range). */
  arenaKb: number;
  arenas: number;
  threads: number;
}

const kbField = (text: string, name: string) =>
  Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN);

/**
 * Reads /proc/PID/status and /proc/PID/smaps. A glibc arena is a 64 MB-aligned reserve split into one
 * read-write mapping and a PROT_NONE rest; adding the two gives 65,536 kB, which is how they are counted here.
 */
export async function nativeMemory(pid: number): Promise<NativeMemory> {
  const [status, smaps] = await Promise.all([
    readFile(`/proc/${pid}/status`, 'utf8'),
    readFile(`/proc/${pid}/smaps`, 'utf8'),
  ]);
  let brkHeapKb = 0;
  const anonymous: { start: number; end: number; rssKb: number; prot: string }[] = [];
  let current: { start: number; end: number; rssKb: number; prot: string; path: string } | undefined;
  const flush = () => {
    if (!current) return;
    if (current.path === '[heap]') brkHeapKb += current.rssKb;
    else if (current.path === '') anonymous.push(current);
  };
  for (const line of smaps.split('\n')) {
    const header = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (header) {
      flush();
      current = {
        start: parseInt(header[1] as string, 16),
        end: parseInt(header[2] as string, 16),
        prot: header[3] as string,
        path: (header[4] ?? '').trim(),
        rssKb: 0,
      };
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss && current) current.rssKb = Number(rss[1]);
  }
  flush();
  // Pair each read-write anonymous mapping with the PROT_NONE mapping right after it.
  let arenaKb = 0;
  let arenas = 0;
  for (let i = 0; i < anonymous.length; i++) {
    const rw = anonymous[i]!;
    const rest = anonymous[i + 1];
    const span =
      (rest && rest.start === rw.end && rest.prot.startsWith('---') ? rest.end : rw.end) - rw.start;
    if (rw.prot.startsWith('rw') && span === 64 * 1024 * 1024) {
      arenas += 1;
      arenaKb += rw.rssKb;
    }
  }
  return {
    rssKb: kbField(status, 'VmRSS'),
    anonKb: kbField(status, 'RssAnon'),
    fileKb: kbField(status, 'RssFile'),
    brkHeapKb,
    arenaKb,
    arenas,
    threads: Number(/^Threads:\s+(\d+)/m.exec(status)?.[1] ?? NaN),
  };
}

/** Established TCP connections of `pid`, by remote port (e.g. one SKR API server each). */
export async function tcpConnectionsByRemotePort(pid: number): Promise<Map<number, number>> {
  const inodes = new Set<string>();
  for (const fd of await readdir(`/proc/${pid}/fd`).catch(() => [] as string[])) {
    const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
    const match = /^socket:\[(\d+)\]$/.exec(target);
    if (match) inodes.add(match[1] as string);
  }
  const byPort = new Map<number, number>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const text = await readFile(table, 'utf8').catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      // state 01 = ESTABLISHED; column 9 is the socket inode.
      if (cols[3] !== '01' || !inodes.has(cols[9] ?? '')) continue;
      const port = parseInt((cols[2] ?? '').split(':')[1] ?? '0', 16);
      byPort.set(port, (byPort.get(port) ?? 0) + 1);
    }
  }
  return byPort;
}
