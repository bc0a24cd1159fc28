#!/usr/bin/env bash
# Builds kube-apiserver and etcd from the Go module proxy into $1 (default: the version-keyed cache).
# The wrapper modules in ../go pin the versions; see docs/decisions/002-test-control-planes.md.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/scripts/go-build.sh"
k8s_version=$(sed -n 's/^export const KUBERNETES_VERSION = .\(v[0-9.]*\).;$/\1/p' "$here/src/versions.ts")
etcd_version=$(sed -n 's/^export const ETCD_VERSION = .\(v[0-9.]*\).;$/\1/p' "$here/src/versions.ts")
out=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/skr-watcher/k8s/$k8s_version}
minor=$(echo "$k8s_version" | cut -d. -f2)
mkdir -p "$out"
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod

echo "[testenv] building kube-apiserver $k8s_version into $out (cold: 10–15 min on 2 cores; progress every 20 s)" >&2
cv=k8s.io/component-base/version
go_build_binary "$here/go/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver "$out/kube-apiserver" -trimpath \
  -ldflags "-s -w -X $cv.gitVersion=$k8s_version -X $cv.gitMajor=1 -X $cv.gitMinor=$minor -X $cv.gitTreeState=clean"

echo "[testenv] building etcd $etcd_version" >&2
go_build_binary "$here/go/etcd" go.etcd.io/etcd/server/v3 "$out/etcd" -trimpath -ldflags "-s -w"
echo "[testenv] binaries ready in $out" >&2
