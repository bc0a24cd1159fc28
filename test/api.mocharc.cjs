// `npm run test:api`: the workspaces' suites that start real kube-apiservers and etcd (testenv) or an OCI registry:
// every suite of the workspaces that test:unit (unit.mocharc.cjs) does not run.
const base = require('../.mocharc.json');
const unit = require('./unit.mocharc.cjs');

/** What `npm test` runs of the workspaces' suites: test:unit and test:api together. */
const WORKSPACE_SUITES = [
  'packages/*/test/**/*.test.ts',
  'webhook/test/**/*.test.ts',
  'agent/test/**/*.test.ts',
  'certs/test/**/*.test.ts',
  'modules/test/**/*.test.ts',
  'kubectl-skr/test/**/*.test.ts',
];

module.exports = { ...base, spec: WORKSPACE_SUITES, ignore: unit.spec };
