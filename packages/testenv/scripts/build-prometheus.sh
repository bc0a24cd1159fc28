#!/usr/bin/env bash
# Builds Prometheus and promtool from the Go module proxy into $1 (default: the version-keyed cache), named
# prometheus-<version> and promtool-<version> so that a version bump builds anew. The wrapper module in
# ../go/prometheus pins the version (docs/decisions/023-operations.md). Tags: remove_all_sd drops every service
# discovery but static and file (tests scrape fixed addresses), which roughly halves the cold build; without
# builtinassets the web UI is not embedded (the API, rules and /metrics work without it).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/scripts/go-build.sh"
k8s_version=$(sed -n 's/^export const KUBERNETES_VERSION = .\(v[0-9.]*\).;$/\1/p' "$here/src/versions.ts")
version=$(sed -n 's/^export const PROMETHEUS_VERSION = .\(v[0-9.]*\).;$/\1/p' "$here/src/versions.ts")
out=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/skr-watcher/k8s/$k8s_version}
mkdir -p "$out"
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod
pv=github.com/prometheus/common/version
ldflags="-s -w -X $pv.Version=$version -X $pv.Branch=module-proxy -X $pv.BuildUser=skr-testenv"
for name in promtool prometheus; do
  if [ -x "$out/$name-$version" ]; then continue; fi
  echo "[testenv] building $name $version into $out (cold: ≈ 10 min on 2 cores; progress every 20 s)" >&2
  go_build_binary "$here/go/prometheus" "github.com/prometheus/prometheus/cmd/$name" "$out/$name-$version" \
    -trimpath -tags remove_all_sd -ldflags "$ldflags"
done
echo "[testenv] prometheus and promtool ready in $out" >&2
