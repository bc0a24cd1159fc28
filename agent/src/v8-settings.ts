// V8 settings the agent needs before any other module runs; imported first by main.ts.
//
// The HTTP client (undici) parses responses with llhttp compiled to WebAssembly. V8 compiles a WebAssembly module
// twice by default: at once with its baseline compiler (Liftoff), then again with its optimizing one, whose zones add
// about 14 MiB to the process for a moment at the first request — the highest point of the agent's memory. Liftoff
// alone parses as fast for the agent's responses (decision 031). Set here rather than on the command line, as a V8
// flag in NODE_OPTIONS is refused, so every way of starting the agent gets it.
import { setFlagsFromString } from 'node:v8';

setFlagsFromString('--liftoff-only');
