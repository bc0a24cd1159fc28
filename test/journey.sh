#!/usr/bin/env bash
# A newcomer's first run, as the README tells it, in a fresh clone of this repository: `npm ci` on the
# machine's own Node and npm (no warning that looks like failure), `npm run demo -- --once`, then
# `npx <name> --help` for every binary the README names. CI runs it (.ci/run) before anything is built.
# Usage: bash test/journey.sh [git ref to clone, default HEAD]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
commit=$(git -C "$repo" rev-parse "${1:-HEAD}")
work=$(mktemp -d "${TMPDIR:-/tmp}/skr-journey.XXXXXX")
trap 'rm -rf "$work"' EXIT
started=$SECONDS
step() { printf '\n-- journey: %s (+%ss)\n' "$1" "$((SECONDS - started))"; }
fail() {
  echo "journey FAILED: $*" >&2
  exit 1
}

step "git clone ${commit:0:12} into $work/clone"
git clone --quiet "$repo" "$work/clone"
cd "$work/clone"
git checkout --quiet --detach "$commit"
# The newcomer's PATH: the machine's Node and npm, nothing from a node_modules of this or any checkout.
PATH=$(tr ':' '\n' <<<"$PATH" | grep -v '/node_modules/' | paste -sd: -)
export PATH

step "npm ci (Node $(node --version), npm $(npm --version))"
npm ci 2>&1 | tee "$work/npm-ci.log"
# undici 8 (from @kubernetes/client-node 2) and the project's own packages (their engines field is what a team
# that installs the kit needs) declare Node >= 22.19, which the project runs on (npm ci installs it); npm checks
# engines against the Node that runs npm and has no setting to check another: the warnings this journey tolerates.
if grep -E 'EBADENGINE|npm (error|ERR!)' "$work/npm-ci.log" | grep -vE "EBADENGINE( Unsupported engine \{| *\}|   (required|current): )|package: '(undici@8\.|@skr-watcher/[a-z-]+@)"; then
  fail "npm ci printed the warnings or errors above"
fi

step "npm run demo -- --once"
npm run demo -- --once 2>&1 | tee "$work/demo.log"
grep -q 'ModuleConfig updated in KCP' "$work/demo.log" || fail "the demo printed no ModuleConfig update"

for name in skr-agent skr-webhook skr-certs skr-modules skr-testenv sample-manager; do
  step "npx $name --help"
  npx --no-install "$name" --help >"$work/$name.help" 2>&1 || {
    cat "$work/$name.help"
    fail "npx $name --help exited non-zero"
  }
  grep -q "^Usage: $name " "$work/$name.help" || {
    cat "$work/$name.help"
    fail "npx $name --help printed no usage of $name"
  }
  head -n 3 "$work/$name.help"
done
step "done: clone, npm ci, demo and every binary's --help as the README says"
