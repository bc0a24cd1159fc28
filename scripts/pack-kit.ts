// Packs the kit a module team installs into a project of its own: @skr-watcher/module-manager (write a manager in
// TypeScript), @skr-watcher/modules (the skr-modules CLI) and every workspace package they depend on, as npm
// tarballs in one directory. `npm install <tarballs>` then needs nothing else but the npm registry for third-party
// packages. Packs what `npm run build` made; refuses a kit that would not install (see kitProblems).
//
//   npm run pack:kit                  tarballs into dist/kit/, their paths on stdout (one a line)
//   npm run pack:kit -- --out <dir>   elsewhere
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
/** What a module team needs; the packages they depend on are found from their dependencies. */
const KIT_ROOTS = ['@skr-watcher/module-manager', '@skr-watcher/modules'];
const SCOPE = '@skr-watcher/';

interface Manifest {
  name: string;
  version: string;
  private?: boolean;
  engines?: { node?: string };
  exports?: Record<string, Record<string, string> | string>;
  files?: string[];
  bin?: Record<string, string>;
  dependencies?: Record<string, string>;
}

interface Workspace {
  dir: string;
  manifest: Manifest;
}

function readManifest(dir: string): Manifest {
  return JSON.parse(readFileSync(join(ROOT, dir, 'package.json'), 'utf8')) as Manifest;
}

/** The workspace packages of the kit, dependencies before dependents (npm installs them in any order). */
function kitWorkspaces(): Workspace[] {
  const byName = new Map<string, Workspace>();
  for (const dir of (readManifest('.') as Manifest & { workspaces: string[] }).workspaces) {
    const manifest = readManifest(dir);
    byName.set(manifest.name, { dir, manifest });
  }
  const ordered: Workspace[] = [];
  const visit = (name: string, from: string) => {
    const workspace = byName.get(name);
    if (!workspace) throw new Error(`${from} depends on ${name}, which is no workspace of this repository`);
    if (ordered.includes(workspace)) return;
    for (const dependency of Object.keys(workspace.manifest.dependencies ?? {}))
      if (dependency.startsWith(SCOPE)) visit(dependency, name);
    ordered.push(workspace);
  };
  for (const name of KIT_ROOTS) visit(name, 'the kit');
  return ordered;
}

/** Why these packages would not install or run outside the repository; empty when they would. */
function kitProblems(workspaces: Workspace[]): string[] {
  const engines = readManifest('.').engines?.node;
  const versions = new Map(workspaces.map((w) => [w.manifest.name, w.manifest.version]));
  return workspaces.flatMap(({ dir, manifest }) => {
    const problems: string[] = [];
    if (manifest.private) problems.push('is private');
    if (manifest.engines?.node !== engines)
      problems.push(`engines.node is ${manifest.engines?.node}, the repository's ${engines}`);
    if (!manifest.files?.includes('dist')) problems.push('files does not list dist');
    for (const [subpath, target] of Object.entries(manifest.exports ?? {})) {
      const runtime = typeof target === 'string' ? target : target['default'];
      if (!runtime || /(^|\/)src\//.test(runtime))
        problems.push(`exports ${subpath} does not point at built code`);
      else if (!existsSync(join(ROOT, dir, runtime)))
        problems.push(`${runtime} is missing: run \`npm run build\` first`);
    }
    for (const [name, bin] of Object.entries(manifest.bin ?? {}))
      if (!manifest.files?.some((f) => bin.replace(/^\.\//, '').startsWith(`${f}/`)))
        problems.push(`bin ${name} (${bin}) is not in files`);
    for (const [dependency, range] of Object.entries(manifest.dependencies ?? {}))
      if (dependency.startsWith(SCOPE) && range !== versions.get(dependency))
        problems.push(`depends on ${dependency}@${range}; the kit packs ${versions.get(dependency)}`);
    return problems.map((problem) => `${manifest.name} (${dir}/package.json): ${problem}`);
  });
}

interface Packed {
  name: string;
  filename: string;
  files: { path: string }[];
}

/** Packs the kit into `out`; returns the tarballs' paths. */
function packKit(out: string): string[] {
  const workspaces = kitWorkspaces();
  const problems = kitProblems(workspaces);
  if (problems.length > 0) throw new Error(`the kit would not install:\n  ${problems.join('\n  ')}`);
  mkdirSync(out, { recursive: true });
  const args = ['pack', '--json', '--ignore-scripts', '--pack-destination', out];
  for (const { dir } of workspaces) args.push('--workspace', dir);
  const npm = spawnSync('npm', args, { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (npm.status !== 0) throw new Error(`npm pack exited ${npm.status}: ${npm.stderr.trim()}`);
  const packed = JSON.parse(npm.stdout) as Packed[];
  const leaked = packed.flatMap((p) =>
    p.files.filter((f) => f.path.startsWith('src/')).map((f) => p.name + '/' + f.path),
  );
  if (leaked.length > 0) throw new Error(`sources in the tarballs: ${leaked.join(', ')}`);
  return packed.map((p) => join(out, p.filename));
}

function main(argv: string[]): number {
  const at = argv.indexOf('--out');
  const unknown = argv.filter((arg, i) => arg !== '--out' && i !== at + 1);
  if (unknown.length > 0 || (at >= 0 && !argv[at + 1])) {
    process.stderr.write(
      `pack-kit: usage: pack-kit [--out <dir>] (got ${unknown.join(' ') || '--out without a dir'})\n`,
    );
    return 2;
  }
  const out = resolve(at >= 0 ? argv[at + 1]! : join(ROOT, 'dist', 'kit'));
  try {
    const tarballs = packKit(out);
    process.stderr.write(
      `pack-kit: ${tarballs.length} tarballs in ${out}; install them with npm install <paths>\n`,
    );
    process.stdout.write(`${tarballs.join('\n')}\n`);
    return 0;
  } catch (error) {
    process.stderr.write(`pack-kit: ${(error as Error).message}\n`);
    return 1;
  }
}

process.exitCode = main(process.argv.slice(2));
