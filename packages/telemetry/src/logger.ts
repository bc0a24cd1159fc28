import { pino, type DestinationStream, type Logger, type LoggerOptions, type LevelWithSilent } from 'pino';

export type { Logger };

/** JSON logs on stdout (or `destination`); `component` names the binary or subsystem on every line. */
export function createLogger(
  component: string,
  level: LevelWithSilent = 'info',
  destination?: DestinationStream,
): Logger {
  const options: LoggerOptions = {
    level: process.env['LOG_LEVEL'] ?? level,
    base: { component },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    // Keys and kubeconfigs must never reach a log line, even by accident.
    redact: {
      paths: ['*.tls.key', '*.keyPem', '*.privateKey', '*.kubeconfig', 'kubeconfig'],
      censor: '[redacted]',
    },
  };
  return destination ? pino(options, destination) : pino(options);
}

/** A logger that discards everything; for tests and embedded use. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
