// Import graph rules (issue 28): no module of the apps or packages may reach itself again through its imports,
// type-only imports included (a loop of types still ties the files into one unit of change). `npm run lint` runs it.
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
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(dist|node_modules)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: join(import.meta.dirname, 'tsconfig.base.json') },
    enhancedResolveOptions: {
      extensions: ['.ts', '.js', '.json'],
      conditionNames: ['source', 'import', 'default'],
    },
  },
};
