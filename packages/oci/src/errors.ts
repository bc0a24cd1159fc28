// Why a module could not be read from its registry, in words a user can act on from a Manifest's status.

/**
 * Machine-readable reasons (a bounded set: safe as a metric label and a condition reason). `transient` ones may
 * pass on their own (retry with backoff); the others need a new publish or a configuration change.
 */
export const MODULE_SOURCE_REASONS = {
  RegistryUnreachable: { transient: true },
  RegistryTimeout: { transient: true },
  RegistryError: { transient: true },
  Unauthorized: { transient: false },
  NotFound: { transient: false },
  DigestMismatch: { transient: false },
  TooLarge: { transient: false },
  MalformedDescriptor: { transient: false },
  UnknownAccessType: { transient: false },
  MalformedArchive: { transient: false },
  MalformedManifest: { transient: false },
  Misconfigured: { transient: false },
} as const satisfies Record<string, { transient: boolean }>;

export type ModuleSourceReason = keyof typeof MODULE_SOURCE_REASONS;

/** One error type for everything that goes wrong between a registry and parsed objects. */
export class ModuleSourceError extends Error {
  override readonly name = 'ModuleSourceError';
  readonly reason: ModuleSourceReason;
  /** The HTTP status the registry answered with, when it answered. */
  readonly status: number | undefined;

  constructor(
    reason: ModuleSourceReason,
    message: string,
    options: { cause?: unknown; status?: number } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.reason = reason;
    this.status = options.status;
  }

  /** Whether trying again later may succeed without anyone changing the registry or the configuration. */
  get transient(): boolean {
    return MODULE_SOURCE_REASONS[this.reason].transient;
  }

  /** The same failure with what was being done in front: "read raw-manifest of x:1.0.0: <message>". */
  within(context: string): ModuleSourceError {
    return new ModuleSourceError(this.reason, `${context}: ${this.message}`, {
      cause: this.cause,
      ...(this.status === undefined ? {} : { status: this.status }),
    });
  }
}

export function isModuleSourceError(error: unknown): error is ModuleSourceError {
  return error instanceof ModuleSourceError;
}
