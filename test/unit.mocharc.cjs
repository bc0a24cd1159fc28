// `npm run test:unit`: the workspaces' suites that start no kube-apiserver, etcd or OCI registry, so they run on a
// fresh clone without the control-plane binaries. The rest of the workspaces' suites are `npm run test:api`
// (api.mocharc.cjs); `npm test` runs both, then test/integration and test/cluster. A suite that starts a server
// belongs to test:api: test/integration/unit-suites.test.ts checks each file listed here.
const base = require('../.mocharc.json');

/** Whole folders whose suites start no server. */
const PURE_FOLDERS = ['packages/api/test', 'packages/pki/test', 'packages/telemetry/test', 'webhook/test'];

/** Suites that start no server in folders where others do. */
const PURE_FILES = [
  'agent/test/custom-state-check.test.ts',
  'agent/test/drift-holds.test.ts',
  'agent/test/event-stream.test.ts',
  'agent/test/fleet-metrics.test.ts',
  'agent/test/full-passes.test.ts',
  'agent/test/listener-budget.test.ts',
  'agent/test/listener-connections.test.ts',
  'agent/test/listener-delivery.test.ts',
  'agent/test/listener-fuzz.test.ts',
  'agent/test/listener-gateway.test.ts',
  'agent/test/listener-xfcc.test.ts',
  'agent/test/listener.test.ts',
  'agent/test/maintenance-window.test.ts',
  'agent/test/mirror-lanes.test.ts',
  'agent/test/module-versions.test.ts',
  'agent/test/modules-flags.test.ts',
  'agent/test/peer-connections.test.ts',
  'agent/test/reconcile-names.test.ts',
  'agent/test/sharding-forward.test.ts',
  'agent/test/sharding-ring.test.ts',
  'agent/test/takeover-field-ownership.test.ts',
  'agent/test/targeted-router.test.ts',
  'agent/test/unknown-modules.test.ts',
  'agent/test/watcher-health.test.ts',
  'agent/test/webhook-configuration.test.ts',
  'certs/test/cli.test.ts',
  'packages/kube/test/failure-attribution.test.ts',
  'packages/kube/test/informer-store.test.ts',
  'packages/kube/test/informer-watch.test.ts',
  'packages/kube/test/object-set-establish.test.ts',
  'packages/kube/test/object-set-transforms.test.ts',
  'packages/kube/test/workqueue-run-order.test.ts',
  'packages/kube/test/workqueue-slow-runs.test.ts',
  'packages/kube/test/workqueue-stuck.test.ts',
  'packages/kube/test/workqueue-timing.test.ts',
  'packages/kube/test/workqueue.test.ts',
  'packages/module-manager/test/contract.test.ts',
  'packages/oci/test/bounded-parse.test.ts',
  'packages/oci/test/registry-answer.test.ts',
  'packages/oci/test/registry-auth.test.ts',
  'packages/oci/test/registry-config.test.ts',
  'packages/oci/test/registry-exchange.test.ts',
  'packages/testenv/test/ports.test.ts',
];

const UNIT_SUITES = [...PURE_FOLDERS.map((folder) => `${folder}/**/*.test.ts`), ...PURE_FILES];

module.exports = { ...base, spec: UNIT_SUITES };
