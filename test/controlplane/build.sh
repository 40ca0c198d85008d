#!/usr/bin/env bash
# Builds a local e2e control plane (etcd, kube-apiserver, kube-controller-manager) and the test
# node's kubelet at one pinned Kubernetes version, from the Go module in that version's folder
# (v1.37/, v1.36/, v1.35/, v1.34/), and caches the binaries outside the clone:
#
#   ${IMAGEPULL_SWEEPER_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/imagepull-sweeper/controlplane}/<version>-<hash>/
#
# etcd is built from the newest pin's module (v1.37/cmd/etcd, etcd v3.7.0) for every version, so
# it is compiled once and an older pin only links it again.
# <hash> covers that version's go.mod and go.sum, the etcd module's go.mod, go.sum and
# cmd/etcd/main.go, this script and the Go version, so any change rebuilds and an unchanged tree
# reuses the cache (a warm run takes well under a second).
#
# Usage: build.sh [--version MINOR] [--print-dir | --with-kubectl]
#   MINOR is 1.37 (default), 1.36, 1.35 or 1.34; $IMAGEPULL_SWEEPER_K8S_VERSION sets it too (the
#   option wins). CI builds all four: 1.37 for the whole suite, 1.34, 1.36 and 1.35 for the
#   compatibility subset (docs/kubernetes-versions.md).
#   Progress goes to stderr; the last line on stdout is the directory holding the binaries.
#   --print-dir prints that directory without building (it may not exist yet).
#   --with-kubectl also builds kubectl from the same module (only the scale benchmark uses it;
#   the tests do not, so it is not built by default).
set -euo pipefail
# Stopped (a background build at the end of a test run, test/support/prebuild.ts): the EXIT trap
# below still removes the half-built set.
trap 'exit 143' TERM INT

# Minor -> pinned release; each has a folder v<minor>/ with go.mod and go.sum.
declare -A PINS=([1.37]=v1.37.2 [1.36]=v1.36.3 [1.35]=v1.35.4 [1.34]=v1.34.4)
ETCD_MINOR=1.37
# The tag date of the pinned release is not needed for anything; keep the build reproducible.
BUILD_DATE=1970-01-01T00:00:00Z

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

minor="${IMAGEPULL_SWEEPER_K8S_VERSION:-1.37}"
mode=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --version) [[ $# -ge 2 ]] || { echo "build.sh: --version needs a value (${!PINS[*]})" >&2; exit 2; }
      minor="$2"; shift ;;
    --version=*) minor="${1#--version=}" ;;
    --print-dir | --with-kubectl) mode="$1" ;;
    *) echo "build.sh: unknown option $1 (use --version MINOR, --print-dir or --with-kubectl)" >&2; exit 2 ;;
  esac
  shift
done
minor="${minor#v}"
if [[ -z "${PINS[$minor]+x}" ]]; then
  echo "build.sh: no pinned Kubernetes version for '$minor' (pinned: ${!PINS[*]})" >&2
  exit 2
fi
K8S_VERSION="${PINS[$minor]}"
K8S_MAJOR="${minor%%.*}"
K8S_MINOR="${minor#*.}"
mod="$here/v$minor"
etcd_mod="$here/v$ETCD_MINOR"

cache_root="${IMAGEPULL_SWEEPER_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/imagepull-sweeper/controlplane}"
hash="$( { cat "$mod/go.mod" "$mod/go.sum" "$etcd_mod/go.mod" "$etcd_mod/go.sum" "$etcd_mod/cmd/etcd/main.go" build.sh
  go version; go env GOOS GOARCH; } | sha256sum | cut -c1-16)"
out="$cache_root/$K8S_VERSION-$hash"
components=(etcd kube-apiserver kube-controller-manager kubelet)

case "$mode" in
  --print-dir) echo "$out"; exit 0 ;;
  --with-kubectl) components+=(kubectl) ;;
esac

complete() {
  [[ -f "$out/.complete" ]] || return 1
  local c
  for c in "${components[@]}"; do [[ -x "$out/$c" ]] || return 1; done
}

if complete; then
  touch "$out/.complete" 2>/dev/null || true
  echo "$out"
  exit 0
fi

mkdir -p "$cache_root"
# One builder at a time (two test processes may both find the cache cold).
exec 9>"$cache_root/.build.lock"
if ! flock -n 9; then
  echo "controlplane: another build holds $cache_root/.build.lock, waiting for it..." >&2
  flock 9
fi
if complete; then
  echo "$out"
  exit 0
fi

start=$SECONDS
log() { echo "controlplane: [$((SECONDS - start))s] $*" >&2; }

# Runs "$@" (a go command writing package names with -v) in the background and prints a
# heartbeat every 15 s with the elapsed time and how many packages it has compiled.
with_progress() {
  local what="$1"; shift
  local plog; plog="$(mktemp)"
  local t0=$SECONDS
  "$@" >"$plog" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    for _ in $(seq 1 15); do
      sleep 1
      kill -0 "$pid" 2>/dev/null || break
    done
    if kill -0 "$pid" 2>/dev/null; then
      local n; n="$(grep -cv "^go: " "$plog" || true)"; [[ "$n" == 0 ]] && n=""
      log "$what: still running, $((SECONDS - t0))s${n:+, $n packages compiled so far}"
    fi
  done
  local rc=0
  wait "$pid" || rc=$?
  if [[ $rc -ne 0 ]]; then
    log "$what FAILED (exit $rc) after $((SECONDS - t0))s; last output:"
    tail -n 60 "$plog" >&2
    rm -f "$plog"
    exit "$rc"
  fi
  log "$what: done in $((SECONDS - t0))s"
  rm -f "$plog"
}

log "building control plane $K8S_VERSION into $out (go $(go env GOVERSION), $(nproc) cores)"
(cd "$mod" && with_progress "go mod download" go mod download)

tmp="$out.tmp.$$"
rm -rf "$tmp"
# An existing complete set keeps its binaries; only the missing ones (e.g. kubectl) are built.
if [[ -f "$out/.complete" ]]; then cp -a "$out" "$tmp"; else mkdir -p "$tmp"; fi
trap 'rm -rf "$tmp"' EXIT

ldflags="-s -w"
# The older pins serve only the compatibility subsets: compiled without inlining (the same code,
# run somewhat slower), their builds take about a quarter less CPU (docs/kubernetes-versions.md
# "CI's time"). The newest pin, which the benchmarks measure, is inlined; so is etcd, built
# from its module for every pin, so an older pin only links it again.
k8s_gcflags=""
[[ "$minor" != "$ETCD_MINOR" ]] && k8s_gcflags="all=-l"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$K8S_MAJOR -X $pkg.gitMinor=$K8S_MINOR"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$BUILD_DATE -X $pkg.gitCommit="
done

declare -A pkgs=(
  [etcd]=./cmd/etcd
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kubelet]=k8s.io/kubernetes/cmd/kubelet
  [kubectl]=k8s.io/kubernetes/cmd/kubectl
)
for c in "${components[@]}"; do
  [[ -x "$tmp/$c" ]] && continue
  dir="$mod"; [[ "$c" == etcd ]] && dir="$etcd_mod"
  log "building $c (${pkgs[$c]} in ${dir#"$here/"})"
  gcflags="$k8s_gcflags"; [[ "$c" == etcd ]] && gcflags=""
  (cd "$dir" && CGO_ENABLED=0 with_progress "$c" go build -v -buildvcs=false -trimpath ${gcflags:+-gcflags "$gcflags"} -ldflags "$ldflags" -o "$tmp/$c" "${pkgs[$c]}")
done

"$tmp/kube-apiserver" --version >&2
"$tmp/kubelet" --version >&2
touch "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
# Drop binaries of other pins/trees (a few hundred MB each) unused for a week, and leftovers of
# interrupted builds; a set still in use by another checkout is kept (warm runs touch .complete).
for old in "$cache_root"/v*; do
  [[ "$old" == "$out" || ! -d "$old" ]] && continue
  if [[ "$old" == *.tmp.* ]]; then
    [[ -n "$(find "$old" -maxdepth 0 -mmin +1440)" ]] && rm -rf "$old"
  elif [[ ! -f "$old/.complete" || -n "$(find "$old/.complete" -mtime +7)" ]]; then
    rm -rf "$old"
  fi
done
log "control plane $K8S_VERSION ready in $out"
echo "$out"
