// Versions of the control-plane binaries; the wrapper Go modules in ../go pin the same ones.
export const KUBERNETES_VERSION = 'v1.35.4';
// The etcd that kube-apiserver v1.35.4 pairs with (`go list -m go.etcd.io/etcd/client/v3` in the wrapper).
export const ETCD_VERSION = 'v3.6.5';
// Prometheus and promtool, built by scripts/build-prometheus.sh; ../go/prometheus pins the same module version.
export const PROMETHEUS_VERSION = 'v0.316.0';
