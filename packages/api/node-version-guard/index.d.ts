// Types of index.js (plain JavaScript so that Node.js versions it refuses can still run it).

/** The lowest Node.js version, as the engines field of @skr-watcher/api states it. */
export declare const REQUIRED_NODE: { readonly range: string; readonly version: string };

/** Why `program` cannot run on Node.js `current` (default: this process's), or undefined when it can. */
export declare function unsupportedNodeReason(program: string, current?: string): string | undefined;

/** Ends the process with exit code 1 and the one-line reason when this Node.js is too old for `program`. */
export declare function exitUnlessSupportedNode(program: string): void;

/** Checks the Node.js version, then imports `entry` (a file URL of the binary's built main). */
export declare function runBin(program: string, entry: URL): Promise<void>;
