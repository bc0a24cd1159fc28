// The dispatch thread (decision 015): owns the queue and the mTLS client to the KCP, so callback sends never
// share an event loop with admission answers. It hears of changes, new certificates and shutdown from the
// admission thread, and tells it counts, depth and log lines.
import { execFile } from 'node:child_process';
import { readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { parseWatchEvent } from '@skr-watcher/api';
import { createLogger } from '@skr-watcher/telemetry';
import { Dispatcher } from './index.js';
import { emptyDispatchStats, type DispatchObserver } from './observer.js';
import { ChangeRing } from './change-ring.js';
import {
  CHANGE_POLL_MS,
  CHANGE_SLEEP_AFTER_MS,
  type DispatchReport,
  type DispatchThreadData,
  type FromDispatch,
  type QueuedChange,
  type ToDispatch,
} from './protocol.js';
import { KcpClient } from '../kcp-client.js';

/**
 * Counts reach the admission thread's metrics at most this late unless asked for (a scrape, `queueDepth()` and
 * shutdown ask, and get them exact). Each report is a message, and a message to the admission thread is queued under
 * a mutex the admission thread takes to read it: held by this SCHED_IDLE thread, which a woken normal thread may take
 * the core from inside it (decision 022). One a second rather than ten.
 */
const REPORT_INTERVAL_MS = 1000;
/**
 * How much nicer the dispatch thread is than the process: CFS then weighs it about a tenth of the admission thread
 * under contention. Relative, so that a webhook started at another nice value keeps its threads in proportion: an
 * absolute 10 starved the callbacks of a webhook run at nice -15 behind every other process of the machine.
 */
const DISPATCH_THREAD_NICE_ABOVE_PROCESS = 10;
/** The highest nice value Linux knows. */
const MAX_NICE = 19;
/** chrt does one system call; a machine where it takes longer has bigger problems than this thread's policy. */
const CHRT_TIMEOUT_MS = 5_000;

const port = parentPort;
if (!port) throw new Error('the dispatch worker runs as a worker thread of skr-webhook');
const data = workerData as DispatchThreadData;
const post = (message: FromDispatch) => port.postMessage(message);

const logger = createLogger('skr-webhook', data.logLevel as 'info', {
  write: (line: string) => post({ type: 'log', line }),
});

const emptyReport = (depth: number): DispatchReport => ({
  ...emptyDispatchStats(),
  depth,
  attempts: { delivered: [], retry: [], rejected: [] },
});
let report = emptyReport(0);
let reportTimer: NodeJS.Timeout | undefined;

function sendReport(): void {
  clearTimeout(reportTimer);
  reportTimer = undefined;
  post({ type: 'report', report });
  report = emptyReport(report.depth);
}

function changed(): void {
  reportTimer ??= setTimeout(sendReport, REPORT_INTERVAL_MS);
}

const observer: DispatchObserver = {
  enqueued() {
    report.enqueued++;
    changed();
  },
  coalesced() {
    report.coalesced++;
    changed();
  },
  delivered() {
    report.delivered++;
    changed();
  },
  dropped(reason) {
    report.dropped[reason]++;
    changed();
  },
  depth(entries) {
    report.depth = entries;
    changed();
  },
  attempt(outcome, seconds) {
    report.attempts[outcome].push(seconds);
    changed();
  },
  breaker(open) {
    report.breakerOpen = open;
    changed();
  },
};

const kcp = new KcpClient({
  address: data.address,
  material: data.material,
  maxSockets: data.workers,
  timeoutMs: data.callbackTimeoutMs,
  serverCommonName: data.kcpServerCn,
});
const dispatcher = new Dispatcher({
  send: kcp.send,
  workers: data.workers,
  maxQueue: data.maxQueue,
  backoffInitialMs: data.backoffInitialMs,
  backoffMaxMs: data.backoffMaxMs,
  maxAgeMs: data.maxAgeMs,
  minGapMs: data.minGapMs,
  logger,
  observer,
  validate: (event) => {
    const checked = parseWatchEvent('v2', event);
    return checked.ok ? undefined : `not a valid v2 event: ${checked.error}`;
  },
});

lowerThreadPriority();
// Changes made while no webhook ran (or this one was starting) have no event: KCP looks at everything once.
dispatcher.resync(data.resyncManager, 'webhook started');

/**
 * On a busy node the admission thread and this one compete for the same cores; a higher nice value for this
 * thread alone (Linux applies setpriority to a thread id) lets the kernel run admission answers first. Callbacks
 * that wait meanwhile coalesce, so fewer are sent. Needs no privilege; elsewhere it is skipped.
 */
function lowerThreadPriority(): void {
  try {
    const threadId = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (Number.isInteger(threadId) && threadId > 0) {
      // A new thread starts with the nice value of the thread that created it, i.e. the process's.
      setPriority(threadId, Math.min(MAX_NICE, getPriority(threadId) + DISPATCH_THREAD_NICE_ABOVE_PROCESS));
      idleScheduling(threadId);
      return;
    }
  } catch (error) {
    logger.debug({ err: error }, 'dispatch thread keeps the default scheduling priority');
  }
  post({ type: 'scheduling', policy: 'default' });
}

/**
 * SCHED_IDLE on top of the nice value. Nice only weighs the thread less: once it runs, the kernel lets it use its
 * time slice (about 1.5 ms on two cores) before a woken admission thread gets the core, and that wait showed in
 * the admission p99 (decision 015). A SCHED_IDLE thread gives way at once when a normal thread of its group wakes.
 * In a pod the policy ranks it only among the container's own threads (the kernel weighs cgroups first), so other
 * pods cannot starve it. Node has no binding for sched_setscheduler(2): util-linux's `chrt` makes the call for
 * this thread id (no privilege needed to lower one's own policy). Without chrt, or where seccomp refuses the
 * call, the nice value stays.
 */
function idleScheduling(threadId: number): void {
  execFile(
    'chrt',
    ['--idle', '--pid', '0', String(threadId)],
    { timeout: CHRT_TIMEOUT_MS },
    (error, _stdout, stderr) => {
      if (error) {
        logger.info(
          { reason: stderr.trim() || error.message },
          'dispatch thread scheduled by its nice value only: SCHED_IDLE could not be set',
        );
      }
      post({ type: 'scheduling', policy: error ? 'nice' : 'idle' });
    },
  );
}

const ring = new ChangeRing(data.ring);
const decoder = new TextDecoder();
let pollTimer: NodeJS.Timeout | undefined;
let emptySince = performance.now();

/** Queues every change in the ring; true if there was any. */
function takeChanges(): boolean {
  const records = ring.readAll();
  for (const record of records) {
    const [manager, event, uid] = JSON.parse(decoder.decode(record)) as QueuedChange;
    dispatcher.enqueue(manager, event, uid ?? undefined);
  }
  return records.length > 0;
}

/** Reads the ring every CHANGE_POLL_MS while changes come; sleeps once it stayed empty (a message wakes it). */
function poll(): void {
  if (takeChanges()) emptySince = performance.now();
  else if (performance.now() - emptySince >= CHANGE_SLEEP_AFTER_MS && ring.sleep()) {
    clearInterval(pollTimer);
    pollTimer = undefined;
  }
}

function awake(): void {
  emptySince = performance.now();
  pollTimer ??= setInterval(poll, CHANGE_POLL_MS);
  poll();
}

port.on('message', (message: ToDispatch) => {
  switch (message.type) {
    case 'wake':
      awake();
      break;
    case 'tls':
      kcp.updateTls(message.material);
      break;
    case 'resync':
      dispatcher.resync(data.resyncManager, message.why);
      break;
    case 'depth':
      takeChanges();
      sendReport();
      post({ type: 'depth', id: message.id, depth: dispatcher.depth });
      break;
    case 'drain':
      takeChanges();
      clearInterval(pollTimer);
      pollTimer = undefined;
      void dispatcher.drain(message.timeoutMs).then(() => {
        kcp.close();
        sendReport();
        post({ type: 'drained' });
        port.close();
      });
      break;
  }
});
awake();
post({ type: 'ready' });
