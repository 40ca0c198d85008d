#!/usr/bin/env bash
# Builds a container runtime for the real test node from the pinned Go module in
# test/runtimes/<name>/ and caches its binaries outside the clone:
#
#   ${IMAGEPULL_SWEEPER_RUNTIMES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/imagepull-sweeper/runtimes}/<name>-<version>-<hash>/
#
# A runtime folder holds go.mod and go.sum (a scratch module that requires the runtime, its
# commands as `tool` entries) and build.env, a bash file this script sources, setting:
#   VERSION    the runtime's version, for the cache directory's name (e.g. v2.4.2)
#   PACKAGES   array of Go packages to build; "bin=pkg" names the binary, else it is the
#              package's last path element
#   TAGS       build tags (optional)
#   LDFLAGS    linker flags (optional; "-s -w" is always added)
#   GCFLAGS    compiler flags for every package (optional; a test tool whose speed does not
#              matter may set "-l", no inlining, to build with about a quarter less CPU)
#   GO_ENV     array of NAME=value set for go (optional: CGO_ENABLED, GONOSUMDB, GOFLAGS...)
#   CHECK      array of commands run after the build, from the output dir, to print versions
#              (optional; e.g. "./containerd --version")
# <hash> covers every file of the folder, this script and the Go version: any change rebuilds,
# an unchanged tree reuses the cache (a warm run takes well under a second).
#
# Usage: build.sh <name> [--print-dir]
#   Progress goes to stderr; the last line on stdout is the directory holding the binaries.
#   --print-dir prints that directory without building (it may not exist yet).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
usage() { echo "usage: build.sh <name> [--print-dir]   (names: $(cd "$here" && ls -d */ 2>/dev/null | tr -d / | tr '\n' ' '))" >&2; exit 2; }

name="${1:-}"
[[ -n "$name" && "$name" != -* ]] || usage
[[ "$name" =~ ^[a-z0-9_]+$ ]] || { echo "build.sh: bad runtime name '$name'" >&2; exit 2; }
dir="$here/$name"
for f in go.mod go.sum build.env; do
  [[ -f "$dir/$f" ]] || { echo "build.sh: $dir/$f is missing" >&2; usage; }
done
print_dir=0
case "${2:-}" in
  --print-dir) print_dir=1 ;;
  "") ;;
  *) echo "build.sh: unknown option $2" >&2; usage ;;
esac

VERSION="" TAGS="" LDFLAGS="" GCFLAGS=""
PACKAGES=() GO_ENV=() CHECK=()
# shellcheck source=/dev/null
source "$dir/build.env"
[[ -n "$VERSION" && ${#PACKAGES[@]} -gt 0 ]] || { echo "build.sh: $dir/build.env must set VERSION and PACKAGES" >&2; exit 2; }

cd "$dir"
cache_root="${IMAGEPULL_SWEEPER_RUNTIMES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/imagepull-sweeper/runtimes}"
hash="$( { find . -type f -print0 | sort -z | xargs -0 sha256sum; sha256sum < "$here/build.sh"; go version; go env GOOS GOARCH; } | sha256sum | cut -c1-16)"
out="$cache_root/$name-$VERSION-$hash"
[[ $print_dir == 1 ]] && { echo "$out"; exit 0; }

declare -A bins=()
for p in "${PACKAGES[@]}"; do
  if [[ "$p" == *=* ]]; then bins["${p%%=*}"]="${p#*=}"; else bins["${p##*/}"]="$p"; fi
done

complete() {
  [[ -f "$out/.complete" ]] || return 1
  local b
  for b in "${!bins[@]}"; do [[ -x "$out/$b" ]] || return 1; done
}

if complete; then
  touch "$out/.complete" 2>/dev/null || true
  echo "$out"
  exit 0
fi

mkdir -p "$cache_root"
# One builder per runtime at a time (two test processes may both find the cache cold).
exec 9>"$cache_root/.build-$name.lock"
if ! flock -n 9; then
  echo "$name: another build holds $cache_root/.build-$name.lock, waiting for it..." >&2
  flock 9
fi
if complete; then
  echo "$out"
  exit 0
fi

start=$SECONDS
log() { echo "$name: [$((SECONDS - start))s] $*" >&2; }

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

for kv in "${GO_ENV[@]}"; do
  [[ "$kv" == [A-Z]*=* ]] || { echo "build.sh: GO_ENV entry '$kv' is not NAME=value" >&2; exit 2; }
  export "${kv?}"
done

log "building $name $VERSION into $out (go $(go env GOVERSION), $(nproc) cores${TAGS:+, tags: $TAGS})"
with_progress "go mod download" go mod download

tmp="$out.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

for b in $(printf '%s\n' "${!bins[@]}" | sort); do
  log "building $b (${bins[$b]})"
  with_progress "$b" go build -v -buildvcs=false -trimpath ${TAGS:+-tags "$TAGS"} \
    ${GCFLAGS:+-gcflags "all=$GCFLAGS"} -ldflags "-s -w $LDFLAGS" -o "$tmp/$b" "${bins[$b]}"
done

for c in "${CHECK[@]}"; do
  (cd "$tmp" && eval "$c") >&2
done
touch "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
# Drop this runtime's binaries of other pins/trees unused for a week, and leftovers of
# interrupted builds; a set still in use by another checkout is kept (warm runs touch .complete).
for old in "$cache_root/$name"-*; do
  [[ "$old" == "$out" || ! -d "$old" ]] && continue
  if [[ "$old" == *.tmp.* ]]; then
    [[ -n "$(find "$old" -maxdepth 0 -mmin +1440)" ]] && rm -rf "$old"
  elif [[ ! -f "$old/.complete" || -n "$(find "$old/.complete" -mtime +7)" ]]; then
    rm -rf "$old"
  fi
done
log "$name $VERSION ready in $out"
echo "$out"
