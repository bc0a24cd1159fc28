#!/usr/bin/env bash
# Builds the node binaries (kubelet, kube-controller-manager, kube-scheduler, kube-proxy), the image tools
# (go-containerregistry's crane and registry) and kustomize from the Go module proxy into $1 (default: the
# version-keyed cache). The wrapper modules in ../go/{node,registry,kustomize} pin the versions; see
# docs/decisions/014-real-nodes.md.
# Each binary is built on its own and moved into place only when complete, so a killed build leaves no
# half-written binary and a rerun resumes where it stopped (the Go build cache keeps finished packages).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
k8s_version=$(sed -n 's/^export const KUBERNETES_VERSION = .\(v[0-9.]*\).;$/\1/p' "$here/src/versions.ts")
out=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/skr-watcher/k8s/$k8s_version}
minor=$(echo "$k8s_version" | cut -d. -f2)
mkdir -p "$out"
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod
cv=k8s.io/component-base/version
ldflags="-s -w -X $cv.gitVersion=$k8s_version -X $cv.gitMajor=1 -X $cv.gitMinor=$minor -X $cv.gitTreeState=clean"

build() { # module dir, package, binary name, ldflags
  if [ -x "$out/$3" ]; then return; fi
  local start=$SECONDS
  echo "[testenv] building $3 into $out (cold: kubelet ≈ 16 min, controller-manager ≈ 5 min on 2 busy cores)" >&2
  # Progress for whoever waits: a cold kubelet build is silent for a quarter of an hour otherwise.
  (while sleep 60; do echo "[testenv] still building $3 ($((SECONDS - start)) s)" >&2; done) &
  local ticker=$!
  (cd "$here/go/$1" && go build -trimpath -o "$out/$3.tmp" -ldflags "$4" "$2") || { kill "$ticker"; return 1; }
  kill "$ticker"
  mv "$out/$3.tmp" "$out/$3"
  echo "[testenv] built $3 in $((SECONDS - start)) s" >&2
}

build registry . registry "-s -w"
build registry github.com/google/go-containerregistry/cmd/crane crane "-s -w"
build kustomize sigs.k8s.io/kustomize/kustomize/v5 kustomize "-s -w"
build node k8s.io/kubernetes/cmd/kube-scheduler kube-scheduler "$ldflags"
build node k8s.io/kubernetes/cmd/kubelet kubelet "$ldflags"
build node k8s.io/kubernetes/cmd/kube-controller-manager kube-controller-manager "$ldflags"
build node k8s.io/kubernetes/cmd/kube-proxy kube-proxy "$ldflags"
echo "[testenv] node binaries ready in $out" >&2
