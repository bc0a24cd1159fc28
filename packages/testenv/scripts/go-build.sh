# Sourced by the build scripts: go_build_binary builds one Go binary with a progress line every
# $GO_BUILD_PROGRESS_SECONDS (20) s, so that a cold build (many minutes on 2 cores) visibly moves:
#   [testenv] kube-apiserver: compiling, 412 of 1893 packages, 4m05s
# Stages: downloading modules (count of modules fetched), compiling (packages built of those the binary
# needs), linking. The binary is written to a .tmp file and moved into place only when complete, so a killed
# build leaves no half-written binary and a rerun resumes from the Go build cache.

# go_build_binary MODULE_DIR PACKAGE OUT_FILE [go build flags...]
go_build_binary() {
  local module_dir=$1 package=$2 out_file=$3
  shift 3
  local name started work ticker status=0
  name=$(basename "$out_file")
  started=$SECONDS
  work=$(mktemp -d "${TMPDIR:-/tmp}/go-build-$name.XXXXXX")
  _go_build_ticker "$name" "$started" "$work" &
  ticker=$!
  # Resolve the package graph first (this downloads the modules) and list the packages not yet in the Go
  # build cache for these flags, which are the ones `go build -v` prints: compiling can then say "n of total".
  echo "resolve" >"$work/stage"
  if (cd "$module_dir" && go list -deps -f '{{if .Stale}}{{.ImportPath}}{{end}}' "$@" "$package" \
    >"$work/deps" 2>"$work/resolve.log"); then
    echo "compile" >"$work/stage"
    # -v prints each package as it is compiled; that is what the ticker counts.
    (cd "$module_dir" && go build -v "$@" -o "$out_file.tmp" "$package") 2>"$work/build.log" || status=$?
  else
    status=$?
    cp "$work/resolve.log" "$work/build.log"
  fi
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  if [ "$status" -ne 0 ]; then
    echo "[testenv] $name: go build failed (exit $status) after $(_go_build_elapsed "$started"); its last lines:" >&2
    grep -v '^go: downloading ' "$work/build.log" | tail -n 40 >&2
    rm -rf "$work"
    return "$status"
  fi
  mv "$out_file.tmp" "$out_file"
  echo "[testenv] $name: built in $(_go_build_elapsed "$started")" >&2
  rm -rf "$work"
}

_go_build_elapsed() {
  local seconds=$((SECONDS - $1))
  printf '%dm%02ds' $((seconds / 60)) $((seconds % 60))
}

_go_build_ticker() {
  local name=$1 started=$2 work=$3 total compiled downloaded
  while sleep "${GO_BUILD_PROGRESS_SECONDS:-20}"; do
    case $(cat "$work/stage" 2>/dev/null) in
      resolve)
        downloaded=$(grep -c '^go: downloading ' "$work/resolve.log" 2>/dev/null || true)
        echo "[testenv] $name: downloading modules, ${downloaded:-0} fetched, $(_go_build_elapsed "$started")" >&2
        ;;
      compile)
        total=$(grep -c . "$work/deps" || true)
        # Package lines are bare import paths; anything else (downloads, errors) has a space or a colon.
        compiled=$(grep -cv '[ :]' "$work/build.log" 2>/dev/null || true)
        if [ "${compiled:-0}" -ge "$total" ]; then
          echo "[testenv] $name: linking, $(_go_build_elapsed "$started")" >&2
        else
          echo "[testenv] $name: compiling, ${compiled:-0} of $total packages, $(_go_build_elapsed "$started")" >&2
        fi
        ;;
    esac
  done
}
