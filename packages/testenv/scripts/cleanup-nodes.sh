#!/usr/bin/env bash
# Undoes every host change of a testenv run with nodes: processes (kubelet, containerd, shims, containers),
# mounts, network namespaces, the run's bridge and veths, cgroups, files outside the run's directory, and
# (after the last run) the kernel settings the kubelet changed. Synchronous and idempotent, so it runs from
# stop(), from an 'exit' handler after SIGINT/SIGTERM, and from .ci/run for runs whose owner was killed.
#   cleanup-nodes.sh <run-id>     one run
#   cleanup-nodes.sh --stale      every registered run whose owner process is gone
#   cleanup-nodes.sh --check      prints what a run left behind (exit 1 if anything)
# Conventions shared with src/run-network.ts and src/nodes.ts (see docs/decisions/014-real-nodes.md).
set -u
STATE=/run/skr-testenv
SHIM_SOCKETS=/run/containerd/s

kill_run_processes() { # run-id plane...
  local id=$1 plane pids round
  shift
  for round in 1 2 3 4 5 6 7 8 9 10; do
    pids=""
    for plane in "$@"; do
      # Everything in the cluster's network namespace (kubelet, containerd, shims, kube-proxy, ...)...
      [ -e "/run/netns/skrw$id-$plane" ] && pids="$pids $(ip netns pids "skrw$id-$plane" 2>/dev/null)"
      # ...and every container process, wherever its network namespace is.
      pids="$pids $(cat /sys/fs/cgroup/pids/skrw$id-$plane/cgroup.procs \
        $(find "/sys/fs/cgroup/pids/skrw$id-$plane" -mindepth 1 -type d -printf '%p/cgroup.procs ' 2>/dev/null) \
        2>/dev/null)"
    done
    pids=$(echo $pids)
    [ -z "$pids" ] && return 0
    # shellcheck disable=SC2086
    kill -9 $pids 2>/dev/null
    sleep 0.3
  done
}

unmount_under() { # dir: deepest first; lazy only if a plain unmount fails
  local dir=$1 target
  [ -n "$dir" ] || return 0
  for _ in 1 2 3; do
    local targets
    targets=$(awk -v d="$dir/" '{ t = $5; gsub(/\\040/, " ", t); if (index(t "/", d) == 1) print t }' /proc/self/mountinfo | sort -r)
    [ -z "$targets" ] && return 0
    while IFS= read -r target; do
      umount "$target" 2>/dev/null || umount -l "$target" 2>/dev/null
    done <<<"$targets"
  done
}

cleanup_run() {
  local id=$1 file=$STATE/runs/$1
  [ -f "$file" ] || return 0
  local dir="" subnet="" planes=""
  # shellcheck disable=SC1090
  . "$file"
  # shellcheck disable=SC2086
  kill_run_processes "$id" $planes
  local plane
  for plane in $planes; do
    local sock="$dir/$plane/node/containerd/containerd.sock" task
    # Shim sockets are named sha256(<containerd address>/<namespace>/<id>) in /run/containerd/s.
    for task in "$dir/$plane/node/containerd/state/io.containerd.runtime.v2.task/k8s.io/"*; do
      [ -d "$task" ] || continue
      rm -f "$SHIM_SOCKETS/$(printf '%s' "$sock/k8s.io/$(basename "$task")" | sha256sum | cut -d' ' -f1)"
    done
    rm -f /var/lib/cni/results/"skrw$id-$plane"-* 2>/dev/null
  done
  unmount_under "$dir"
  for plane in $planes; do
    ip netns del "skrw$id-$plane" 2>/dev/null
    local controller
    for controller in /sys/fs/cgroup/*/; do
      [ -d "$controller/skrw$id-$plane" ] && find "$controller/skrw$id-$plane" -depth -type d -exec rmdir {} + 2>/dev/null
    done
  done
  ip link del "skrw$id" 2>/dev/null
  # The kubelet links every container log into /var/log/containers whatever its flags say.
  find /var/log/containers -maxdepth 1 -type l -lname "$dir/*" -delete 2>/dev/null
  rm -rf "$STATE/nets/$subnet" "$file"
  last_run_restores
}

# Kernel settings the kubelet sets for the whole machine, and paths it creates outside its flags: restored
# and removed once no run is left (two concurrent runs share them).
last_run_restores() {
  ls "$STATE/runs" 2>/dev/null | grep -q . && return 0
  if [ -f "$STATE/sysctl.orig" ]; then
    local key value
    while read -r key value; do sysctl -qw "$key=$value" 2>/dev/null; done <"$STATE/sysctl.orig"
    rm -f "$STATE/sysctl.orig"
  fi
  if [ -f "$STATE/created" ]; then
    local path
    sort -r "$STATE/created" | while read -r path; do rm -rf -- "$path"; done
    rm -f "$STATE/created"
  fi
  if [ -f "$STATE/created-if-empty" ]; then
    sort -r "$STATE/created-if-empty" | while read -r path; do rmdir -- "$path" 2>/dev/null; done
    rm -f "$STATE/created-if-empty"
  fi
  [ -f "$STATE/ip_forward.orig" ] && { sysctl -qw "net.ipv4.ip_forward=$(cat "$STATE/ip_forward.orig")"; rm -f "$STATE/ip_forward.orig"; }
  rmdir "$STATE/runs" "$STATE/nets" "$STATE" 2>/dev/null
  return 0
}

check() {
  local found=0
  if ls "$STATE/runs" 2>/dev/null | grep -q .; then echo "registered runs: $(ls "$STATE/runs")"; found=1; fi
  if ip netns list 2>/dev/null | grep -q '^skrw'; then echo "network namespaces: $(ip netns list | grep '^skrw')"; found=1; fi
  if ip -br link 2>/dev/null | grep -q '^skrw'; then echo "links: $(ip -br link | grep '^skrw')"; found=1; fi
  # Every node keeps its state under <plane dir>/node/ (src/nodes.ts).
  local ours=' /run/netns/skrw\|/node/containerd/\|/node/kubelet/'
  if grep -q "$ours" /proc/self/mountinfo; then
    echo "mounts:"; grep "$ours" /proc/self/mountinfo | awk '{print "  " $5}'; found=1
  fi
  if pgrep -f '/node/containerd/containerd\.(sock|toml)' >/dev/null; then
    echo "containerd or shims:"; pgrep -af '/node/containerd/containerd\.(sock|toml)'; found=1
  fi
  if ls -d /sys/fs/cgroup/*/skrw* >/dev/null 2>&1; then echo "cgroups: $(ls -d /sys/fs/cgroup/*/skrw*)"; found=1; fi
  if command -v iptables-save >/dev/null && iptables-save 2>/dev/null | grep -q '^:\(KUBE\|CNI\)'; then
    echo "iptables chains in the host namespace:"; iptables-save | grep '^:\(KUBE\|CNI\)'; found=1
  fi
  return $found
}

case "${1:-}" in
  --stale)
    for file in "$STATE"/runs/*; do
      [ -f "$file" ] || continue
      pid=$(sed -n 's/^pid=//p' "$file")
      if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then cleanup_run "$(basename "$file")"; fi
    done
    ;;
  --check) check ;;
  "") echo "usage: cleanup-nodes.sh <run-id> | --stale | --check" >&2; exit 2 ;;
  *) cleanup_run "$1" ;;
esac
