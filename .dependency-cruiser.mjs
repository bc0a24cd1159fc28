// Import graph rules, run by `npm run lint`: no module of the apps or packages may reach itself again through its
// imports, type-only imports included (a loop of types still ties the files into one unit of change), and the
// packages never stand on an app.
import { join } from 'node:path';

/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A cycle makes two files one unit; move the shared types or values to the file both stand on.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'packages-not-on-apps',
      severity: 'error',
      comment:
        'packages/* are what the apps (agent, webhook, certs, modules, examples, the demo) are built from; a package ' +
        'that imports an app cannot be used without it. Move what both need into a package.',
      from: { path: '^packages/' },
      to: { path: '^(agent|webhook|certs|modules|examples|demo)/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(dist|node_modules)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: join(import.meta.dirname, 'tsconfig.base.json') },
    enhancedResolveOptions: {
      // Workspace packages resolve through their `exports` (source condition) to their sources, so imports between
      // packages and apps are edges of the graph too.
      exportsFields: ['exports'],
      extensions: ['.ts', '.js', '.json'],
      conditionNames: ['source', 'import', 'default'],
    },
  },
};
