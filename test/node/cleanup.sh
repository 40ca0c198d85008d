#!/usr/bin/env bash
# Tears down what is left of one test node (test/support/node.ts), given its run dir:
# kills the process groups it started, then every process left in its cgroups (containers,
# shims), unmounts whatever is mounted under the run dir (rootfs, shm, netns), deletes its CNI
# bridge and cgroups, and removes the run dir (keeping logs/ with --keep-logs).
# Safe to run twice; used by stop(), by the watchdog when the test process dies, and by node:down.
#
# Usage: cleanup.sh RUN_DIR [--keep-logs]
set -uo pipefail
run="${1:?usage: cleanup.sh RUN_DIR [--keep-logs]}"
keep="${2:-}"
[[ -d "$run" ]] || exit 0
cgname="" bridge=""
# shellcheck disable=SC1091
[[ -f "$run/node.env" ]] && source "$run/node.env"

group_alive() { kill -0 -- "-$1" 2>/dev/null; }
if [[ -f "$run/pids" ]]; then
  mapfile -t pids < <(tac "$run/pids")
  for p in "${pids[@]}"; do group_alive "$p" && kill -TERM -- "-$p" 2>/dev/null; done
  for _ in $(seq 1 50); do
    alive=0
    for p in "${pids[@]}"; do group_alive "$p" && alive=1; done
    [[ $alive == 0 ]] && break
    sleep 0.1
  done
  for p in "${pids[@]}"; do group_alive "$p" && kill -KILL -- "-$p" 2>/dev/null; done
fi

# Every cgroup dir of this node, deepest first, in every hierarchy (v1) or the unified one (v2).
cgdirs() {
  [[ -n "$cgname" ]] || return 0
  local base
  for base in /sys/fs/cgroup /sys/fs/cgroup/*; do
    [[ -d "$base/$cgname" ]] && find "$base/$cgname" -depth -type d
  done
}
if [[ -n "$cgname" ]]; then
  for _ in $(seq 1 50); do
    left=0
    while read -r d; do
      [[ -f "$d/cgroup.procs" ]] || continue
      while read -r p; do
        [[ -n "$p" ]] || continue
        left=1
        kill -KILL "$p" 2>/dev/null
      done <"$d/cgroup.procs"
    done < <(cgdirs)
    [[ $left == 0 ]] && break
    sleep 0.1
  done
fi

# Mount points under the run dir, deepest first (paths in /proc/mounts escape spaces as \040).
awk -v r="$run/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
  umount -l "$(printf '%b' "$m")" 2>/dev/null
done

[[ -n "$bridge" ]] && ip link del "$bridge" 2>/dev/null
cgdirs | while read -r d; do rmdir "$d" 2>/dev/null; done

if [[ "$keep" == "--keep-logs" ]]; then
  find "$run" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf {} + 2>/dev/null
else
  rm -rf "$run" 2>/dev/null
fi
exit 0
