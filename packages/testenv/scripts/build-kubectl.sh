#!/usr/bin/env bash
# Builds kubectl (k8s.io/kubectl's command tree in the wrapper ../go/kubectl, which pins its version) from the Go
# module proxy into $1, the version-keyed cache. Same flags as kube-apiserver, so the packages they share come
# from the Go build cache.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/scripts/go-build.sh"
k8s_version=$(sed -n 's/^export const KUBERNETES_VERSION = .\(v[0-9.]*\).;$/\1/p' "$here/src/versions.ts")
out=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/skr-watcher/k8s/$k8s_version}
minor=$(echo "$k8s_version" | cut -d. -f2)
mkdir -p "$out"
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod
echo "[testenv] building kubectl $k8s_version into $out (cold: minutes on 2 cores; progress every 20 s)" >&2
cv=k8s.io/component-base/version
gv=k8s.io/client-go/pkg/version
go_build_binary "$here/go/kubectl" . "$out/kubectl" -trimpath -ldflags "-s -w \
  -X $cv.gitVersion=$k8s_version -X $cv.gitMajor=1 -X $cv.gitMinor=$minor -X $cv.gitTreeState=clean \
  -X $gv.gitVersion=$k8s_version -X $gv.gitMajor=1 -X $gv.gitMinor=$minor -X $gv.gitTreeState=clean"
