#!/usr/bin/env bash
# Builds kube-apiserver and etcd from the Go module proxy into $1 (default: the version-keyed cache).
# The wrapper modules in ../go pin the versions; see docs/decisions/002-test-control-planes.md.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
k8s_version=$(sed -n 's/^export const KUBERNETES_VERSION = .\(v[0-9.]*\).;$/\1/p' "$here/src/versions.ts")
etcd_version=$(sed -n 's/^export const ETCD_VERSION = .\(v[0-9.]*\).;$/\1/p' "$here/src/versions.ts")
out=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/skr-watcher/k8s/$k8s_version}
minor=$(echo "$k8s_version" | cut -d. -f2)
mkdir -p "$out"
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod

echo "[testenv] building kube-apiserver $k8s_version into $out (a cold build takes several minutes)" >&2
cd "$here/go/kube-apiserver"
cv=k8s.io/component-base/version
go build -trimpath -o "$out/kube-apiserver.tmp" \
  -ldflags "-s -w -X $cv.gitVersion=$k8s_version -X $cv.gitMajor=1 -X $cv.gitMinor=$minor -X $cv.gitTreeState=clean" \
  k8s.io/kubernetes/cmd/kube-apiserver
mv "$out/kube-apiserver.tmp" "$out/kube-apiserver"

echo "[testenv] building etcd $etcd_version" >&2
cd "$here/go/etcd"
go build -trimpath -o "$out/etcd.tmp" -ldflags "-s -w" go.etcd.io/etcd/server/v3
mv "$out/etcd.tmp" "$out/etcd"
echo "[testenv] binaries ready in $out" >&2
