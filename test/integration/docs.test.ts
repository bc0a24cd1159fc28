// The documentation says what is true of this checkout: the configuration reference is what the generator writes
// from the binaries' flags, every link and section it points at exists, every command it shows names binaries,
// subcommands, flags and npm scripts that exist, the examples that need no cluster run as written, and the decision
// records keep their template.
import { execFile, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { CONFIGURATION_DOC } from '../../scripts/generate-config-docs.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const run = promisify(execFile);

/** README.md and every Markdown file under docs/, as paths relative to the root. */
function documents(): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(join(root, dir)).flatMap((name) => {
      const path = join(dir, name);
      return statSync(join(root, path)).isDirectory() ? walk(path) : name.endsWith('.md') ? [path] : [];
    });
  return ['README.md', 'CHANGELOG.md', ...walk('docs')];
}

const read = (path: string) => readFileSync(join(root, path), 'utf8');

interface CodeBlock {
  language: string;
  text: string;
  /** The `<!-- docs-check: … -->` marker right above the fence, if any. */
  check?: string;
  line: number;
}

function codeBlocks(markdown: string): CodeBlock[] {
  const blocks: CodeBlock[] = [];
  const lines = markdown.split('\n');
  let marker: string | undefined;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    const check = /^<!-- docs-check: (\w+) -->$/.exec(line);
    if (check) {
      marker = check[1];
      continue;
    }
    const fence = /^\s*```(\S*)/.exec(line);
    if (!fence) {
      if (line.trim() !== '') marker = undefined;
      continue;
    }
    const body: string[] = [];
    const start = i + 1;
    for (i++; i < lines.length && !/^\s*```\s*$/.test(lines[i] as string); i++) body.push(lines[i] as string);
    blocks.push({
      language: fence[1] ?? '',
      text: body.join('\n'),
      line: start,
      ...(marker ? { check: marker } : {}),
    });
    marker = undefined;
  }
  return blocks;
}

/** Markdown text outside fenced code blocks. */
function prose(markdown: string): string {
  return markdown.replace(/^\s*```[\s\S]*?^\s*```\s*$/gm, '');
}

/** GitHub's anchors of a document's headings. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const match of prose(markdown).matchAll(/^#{1,6} (.+)$/gm)) {
    const slug = (match[1] as string)
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    result.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return result;
}

/** Flags and subcommands per command, read from the generated reference (itself checked against the binaries). */
function commandReference(): Map<string, Set<string>> {
  const commands = new Map<string, Set<string>>();
  let current: Set<string> | undefined;
  for (const line of read('docs/configuration.md').split('\n')) {
    const heading = /^#{2,3} (\S+(?: \S+)?)$/.exec(line);
    if (heading) {
      current = new Set(['--help', '-h']);
      commands.set(heading[1] as string, current);
      continue;
    }
    const row = /^\| `([^`]+)` \|/.exec(line);
    if (row && current)
      for (const flag of (row[1] as string).matchAll(/(?:^|[\s,])(--?[\w-]+)/g))
        current.add(flag[1] as string);
  }
  return commands;
}

const BINARIES = ['skr-agent', 'skr-webhook', 'skr-certs', 'skr-modules', 'skr-testenv', 'sample-manager'];

/** Words of one shell command, quotes removed; a quoted word is never taken for a flag. */
function words(command: string): { text: string; quoted: boolean }[] {
  const result: { text: string; quoted: boolean }[] = [];
  for (const match of command.matchAll(/'([^']*)'|"([^"]*)"|(\S+)/g)) {
    result.push({ text: match[1] ?? match[2] ?? match[3] ?? '', quoted: match[3] === undefined });
  }
  return result;
}

/** The commands of a shell block: continuations joined, here-documents and comments dropped, split at operators. */
function commandsOf(block: string): string[] {
  const lines: string[] = [];
  let hereDocument: string | undefined;
  for (const line of block.replace(/\\\n/g, ' ').split('\n')) {
    if (hereDocument !== undefined) {
      if (line.trim() === hereDocument) hereDocument = undefined;
      continue;
    }
    hereDocument = /<<-?\s*'?(\w+)'?/.exec(line)?.[1];
    lines.push(line.replace(/(^|\s)#.*$/, ''));
  }
  return lines
    .flatMap((line) => line.replace(/\$\(|\)/g, ';').split(/&&|\|\||[;|&<>]/))
    .map((command) => command.trim())
    .filter((command) => command !== '');
}

/** What is wrong with one documented command: an unknown binary subcommand, flag, npm script or script file. */
function problemsOf(
  command: string,
  reference: Map<string, Set<string>>,
  scripts: Record<string, string>,
): string[] {
  const list = words(command);
  const first = list[0]?.text;
  const second = list[1]?.text;
  if (first === 'npm' && (second === 'run' || second === 'test')) {
    const script = second === 'test' ? 'test' : list[2]?.text;
    return script && scripts[script] ? [] : [`npm script ${script ?? '(none)'} does not exist`];
  }
  if (first === 'bash' && list[1] && !list[1].text.startsWith('-'))
    return existsSync(join(root, list[1].text)) ? [] : [`${list[1].text} does not exist`];
  let at = 0;
  if (first === 'npx') at = list[1]?.text === '--no-install' ? 2 : 1;
  const binary = list[at]?.text;
  if (!binary || !BINARIES.includes(binary)) return [];
  const rest = list.slice(at + 1);
  const subcommands = [...reference.keys()]
    .filter((key) => key.startsWith(`${binary} `))
    .map((key) => key.split(' ')[1]);
  let key = binary;
  const positional = rest.find((word) => !word.text.startsWith('-'));
  if (subcommands.length > 0 && positional && rest.indexOf(positional) === 0) {
    if (!subcommands.includes(positional.text)) return [`${binary} has no command ${positional.text}`];
    key = `${binary} ${positional.text}`;
  }
  const flags = reference.get(key);
  if (!flags) return [`no reference for ${key}`];
  return rest
    .filter((word) => !word.quoted && /^--?[a-zA-Z]/.test(word.text))
    .map((word) => word.text.split('=')[0] as string)
    .filter((flag) => !flags.has(flag))
    .map((flag) => `${key} has no option ${flag}`);
}

async function portFree(port: number): Promise<boolean> {
  return new Promise((resolvePort) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolvePort(false);
    });
    socket.once('error', () => resolvePort(true));
  });
}

/** Runs a document's `<!-- docs-check: run -->` blocks in order in one bash, in a scratch directory of the checkout. */
async function runExamples(document: string): Promise<{ code: number | null; output: string }> {
  const script = codeBlocks(read(document))
    .filter((block) => block.check === 'run')
    .map((block) => block.text)
    .join('\n');
  expect(script, `${document} has no block marked <!-- docs-check: run -->`).to.not.equal('');
  const scratch = await mkdtemp(join(root, 'tmp', 'docs-check-'));
  try {
    const child = spawn('bash', ['-euo', 'pipefail', '-c', script], {
      cwd: scratch,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => process.kill(-(child.pid as number), 'SIGKILL'), 240_000);
    const code = await new Promise<number | null>((done) => child.once('close', done));
    clearTimeout(timer);
    // Whatever the examples left running in the background (a registry after a failure) goes with its group.
    try {
      process.kill(-(child.pid as number), 'SIGKILL');
    } catch {
      // The group is gone already.
    }
    return { code, output };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

describe('documentation', function () {
  this.timeout(300_000);

  before(async () => {
    await mkdir(join(root, 'tmp'), { recursive: true });
  });

  it('docs/configuration.md is what npm run generate:docs writes from the flag definitions (run it after changing a flag)', async () => {
    const env = { ...process.env };
    delete env['MAINTENANCE_POLICY_PATH'];
    const { stdout } = await run(
      process.execPath,
      ['--import', 'tsx', '--conditions=source', 'scripts/generate-config-docs.ts', '--stdout'],
      { cwd: root, env, maxBuffer: 16 * 1024 * 1024 },
    );
    expect(readFileSync(CONFIGURATION_DOC, 'utf8'), 'docs/configuration.md is stale').to.equal(stdout);
  });

  it('README.md fits a first read: at most 150 lines, none over 400 characters, the two first commands on its first screen', () => {
    const lines = read('README.md').split('\n');
    expect(lines.length).to.be.at.most(151);
    expect(lines.filter((line) => line.length > 400)).to.deep.equal([]);
    const firstScreen = lines.slice(0, 25).join('\n');
    expect(firstScreen).to.include('npm ci && npm run demo');
    expect(firstScreen).to.include('npm ci && npm test');
  });

  it('every relative link of README.md, CHANGELOG.md and docs/ leads to a file and, with an anchor, to a heading of it', () => {
    const broken: string[] = [];
    for (const document of documents()) {
      for (const match of prose(read(document)).matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = match[1] as string;
        if (/^[a-z]+:/.test(target)) continue;
        const [path, anchor] = target.split('#') as [string, string | undefined];
        const file = path === '' ? join(root, document) : resolve(dirname(join(root, document)), path);
        if (!existsSync(file)) {
          broken.push(`${document}: ${target} (no such file)`);
          continue;
        }
        if (anchor && !anchors(readFileSync(file, 'utf8')).has(anchor))
          broken.push(`${document}: ${target} (no heading #${anchor} in ${relative(root, file)})`);
      }
      // A section named in words (`README "Troubleshooting"`) must be a heading of that document too.
      for (const match of prose(read(document)).matchAll(/\bREADME "([^"]+)"/g)) {
        const heading = (match[1] as string)
          .toLowerCase()
          .replace(/[^\p{L}\p{N}\s_-]/gu, '')
          .replace(/\s/g, '-');
        if (!anchors(read('README.md')).has(heading))
          broken.push(`${document}: README "${match[1]}" (no such section)`);
      }
    }
    expect(broken).to.deep.equal([]);
  });

  it('every decision record the documents name exists', () => {
    const records = readdirSync(join(root, 'docs/decisions')).map((name) => name.slice(0, 3));
    const missing = documents().flatMap((document) =>
      [...read(document).matchAll(/[Dd]ecisions? (\d{3})/g)]
        .map((match) => match[1] as string)
        .filter((number) => !records.includes(number))
        .map((number) => `${document}: decision ${number}`),
    );
    expect(missing).to.deep.equal([]);
  });

  it('every command shown in README.md and docs/ names binaries, subcommands, flags, npm scripts and files that exist', () => {
    const reference = commandReference();
    const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;
    const problems = documents()
      .filter((document) => document !== 'docs/configuration.md')
      .flatMap((document) =>
        codeBlocks(read(document))
          .filter((block) => block.language === 'sh')
          .flatMap((block) =>
            commandsOf(block.text).flatMap((command) =>
              problemsOf(command, reference, scripts).map(
                (problem) => `${document}:${block.line}: ${problem}`,
              ),
            ),
          ),
      );
    expect(problems).to.deep.equal([]);
  });

  it('the check of commands finds a wrong flag, subcommand and npm script', () => {
    const reference = commandReference();
    const scripts = { demo: 'node demo/run.ts' };
    expect(problemsOf('npx skr-certs issue --runtime-id a --domian b', reference, scripts)).to.deep.equal([
      'skr-certs issue has no option --domian',
    ]);
    expect(problemsOf('skr-agent start --shard', reference, scripts)).to.deep.equal([
      'skr-agent has no command start',
    ]);
    expect(problemsOf('npm run demos', reference, scripts)).to.deep.equal([
      'npm script demos does not exist',
    ]);
    expect(problemsOf("skr-agent run --node-flags '--x'", reference, scripts)).to.deep.equal([
      'skr-agent run has no option --node-flags',
    ]);
    expect(problemsOf('npm run demo -- --once', reference, scripts)).to.deep.equal([]);
  });

  it("README.md's examples that need no cluster run as written", async () => {
    const { code, output } = await runExamples('README.md');
    expect(code, output.slice(-4000)).to.equal(0);
    expect(output).to.match(/^Usage: skr-agent /m);
    expect(output).to.match(/^Usage: skr-modules /m);
  });

  it("the module teams' guide's examples that need no cluster run as written: a registry, publish, inspect", async function () {
    // The guide's registry listens on 127.0.0.1:5000; another run of this test may hold it for a moment.
    for (let waited = 0; !(await portFree(5000)); waited += 1) {
      if (waited >= 60) throw new Error('127.0.0.1:5000 stays taken; the guide starts its registry there');
      await new Promise((done) => setTimeout(done, 1000));
    }
    const { code, output } = await runExamples('docs/module-teams.md');
    expect(code, output.slice(-4000)).to.equal(0);
    expect(output).to.include('component:       kyma-project.io/module/greeter');
    expect(output).to.include('published kyma-project.io/module/greeter:1.0.0');
    expect(output).to.match(/^Usage: sample-manager /m);
  });

  it("the module teams' guide's TypeScript compiles against the kit", async () => {
    const blocks = codeBlocks(read('docs/module-teams.md')).filter((block) => block.language === 'ts');
    expect(blocks).to.have.length.greaterThan(0);
    const scratch = await mkdtemp(join(root, 'tmp', 'docs-ts-'));
    try {
      await Promise.all(
        blocks.map((block, i) => writeFile(join(scratch, `example-${i}.ts`), `${block.text}\n`)),
      );
      // The repository's compiler settings, as a manager built inside this repository is compiled.
      const tsconfig = {
        extends: relative(scratch, join(root, 'tsconfig.base.json')),
        compilerOptions: {
          noEmit: true,
          composite: false,
          declaration: false,
          declarationMap: false,
          customConditions: ['source'],
        },
        include: ['*.ts'],
      };
      await writeFile(join(scratch, 'tsconfig.json'), JSON.stringify(tsconfig));
      const tsc = join(root, 'node_modules/typescript/bin/tsc');
      await run(process.execPath, [tsc, '-p', scratch], { cwd: root }).catch((error: { stdout?: string }) => {
        throw new Error(`the guide's TypeScript does not compile:\n${error.stdout ?? String(error)}`);
      });
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
  });

  it('every decision record keeps the template: number and title, status, date, context, decision, consequences', () => {
    const dir = join(root, 'docs/decisions');
    const records = readdirSync(dir).filter((name) => /^\d{3}-.*\.md$/.test(name));
    const index = read('docs/decisions/README.md');
    const problems: string[] = [];
    for (const name of records) {
      const text = readFileSync(join(dir, name), 'utf8');
      const lines = text.split('\n');
      const number = name.slice(0, 3);
      if (!new RegExp(`^# ${number}\\. \\S`).test(lines[0] ?? ''))
        problems.push(`${name}: first line is not "# ${number}. Title"`);
      const status = /^Status: (Accepted|Superseded by (\d{3}))$/.exec(lines[2] ?? '');
      if (!status)
        problems.push(`${name}: third line is not "Status: Accepted" or "Status: Superseded by NNN"`);
      else if (status[2] && !records.some((other) => other.startsWith(status[2] as string)))
        problems.push(`${name}: superseded by a record that does not exist`);
      if (!/^Date: \d{4}-\d{2}-\d{2}$/.test(lines[3] ?? ''))
        problems.push(`${name}: fourth line is not "Date: YYYY-MM-DD"`);
      const sections = [...prose(text).matchAll(/^## (.+)$/gm)].map((match) => match[1]);
      if (sections.join('|') !== 'Context|Decision|Consequences')
        problems.push(`${name}: sections are ${sections.join(', ')}, not Context, Decision, Consequences`);
      if (lines.length > 100) problems.push(`${name}: ${lines.length} lines; a record is about its decision`);
      if (!index.includes(`(${name})`)) problems.push(`${name}: not listed in docs/decisions/README.md`);
    }
    expect(problems).to.deep.equal([]);
  });

  it('docs/benchmarks.md gives each figure with its command, commit, date and load', async () => {
    const rows = read('docs/benchmarks.md')
      .split('\n')
      .filter((line) => line.startsWith('| ') && !line.startsWith('| bar ') && !line.startsWith('|---'));
    expect(rows.length).to.be.greaterThan(10);
    const { stdout: shallow } = await run('git', ['rev-parse', '--is-shallow-repository'], { cwd: root });
    const problems: string[] = [];
    for (const row of rows) {
      const cells = row
        .slice(1, -1)
        .split('|')
        .map((cell) => cell.trim());
      if (cells.length !== 6) {
        problems.push(`${row}: expected six cells`);
        continue;
      }
      const [, figure, , command, when, load] = cells as [string, string, string, string, string, string];
      if (figure === 'not measured') continue;
      if (load === '') problems.push(`${row}: no load average`);
      if (
        !/^`(npm run|npx) /.test(command) &&
        command !== 'as the row above' &&
        !command.startsWith('as the ')
      )
        problems.push(`${row}: no command`);
      const commit = /^([0-9a-f]{7,40}), (\d{4}-\d{2}-\d{2})$/.exec(when);
      if (!commit) {
        problems.push(`${row}: no "commit, date"`);
        continue;
      }
      if (shallow.trim() === 'false') {
        await run('git', ['cat-file', '-e', `${commit[1]}^{commit}`], { cwd: root }).catch(() =>
          problems.push(`${row}: commit ${commit[1]} is not in this repository`),
        );
      }
    }
    expect(problems).to.deep.equal([]);
  });
});
