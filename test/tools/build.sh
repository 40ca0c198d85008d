#!/usr/bin/env bash
# Builds a test tool from the pinned Go module in test/tools/<name>/ (go.mod, go.sum, build.env,
# the same layout as test/runtimes/) and caches it outside the clone:
#
#   ${IMAGEPULL_SWEEPER_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/imagepull-sweeper/tools}/<name>-<version>-<hash>/
#
# <hash> covers every file of the folder, this script and the Go version. The build itself is
# test/runtimes/build.sh's: this script points it at test/tools/ and the tools cache.
#
# Usage: build.sh <name> [--print-dir]   (last stdout line: the directory holding the binaries)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
name="${1:-}"
[[ "$name" =~ ^[a-z0-9_]+$ && -d "$here/$name" ]] || { echo "usage: build.sh <name> [--print-dir]   (names: $(cd "$here" && ls -d */ | tr -d / | tr '\n' ' '))" >&2; exit 2; }
# runtimes/build.sh resolves module folders next to itself: run a copy of it from a scratch
# folder where <name> links to test/tools/<name>. Its hash reads the files through the link.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
cp "$here/../runtimes/build.sh" "$scratch/build.sh"
ln -s "$here/$name" "$scratch/$name"
IMAGEPULL_SWEEPER_RUNTIMES_CACHE="${IMAGEPULL_SWEEPER_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/imagepull-sweeper/tools}" \
  bash "$scratch/build.sh" "$@"
