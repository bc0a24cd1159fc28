#!/usr/bin/env bash
# Builds the test registry (go-containerregistry's pkg/registry in the wrapper ../go/registry, which pins its
# version) from the Go module proxy into $1, the cache directory src/registry.ts keys by the wrapper's content.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/scripts/go-build.sh"
out=${1:?usage: build-registry.sh OUT_DIR}
mkdir -p "$out"
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod
echo "[testenv] building the registry into $out (cold: 1–3 min on 2 cores, progress every 20 s)" >&2
go_build_binary "$here/go/registry" . "$out/oci-registry" -trimpath -ldflags "-s -w"
