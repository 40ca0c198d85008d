#!/usr/bin/env bash
# Installs what the real test node needs (Debian/Ubuntu, root): containerd, runc, conmon
# (CRI-O's monitor), the CNI plugins, the distribution registry, skopeo, umoci, htpasswd, and
# faketime (the sweeper on a skewed clock, test/e2e/node-clock.test.ts), and Prometheus with
# promtool (the alert rules' tests and test/e2e/prometheus.test.ts). Idempotent: when
# everything is there it only checks and exits (well under a second). Services the packages ship
# are not left running: the tests start their own instances on loopback.
#
# Usage: setup.sh [--check]   (--check: exit 1 listing what is missing, install nothing)
set -euo pipefail

# command -> Debian package
declare -A need=(
  [containerd]=containerd
  [runc]=runc
  [conmon]=conmon
  [/usr/lib/cni/bridge]=containernetworking-plugins
  [/usr/lib/cni/host-local]=containernetworking-plugins
  [/usr/lib/cni/loopback]=containernetworking-plugins
  [docker-registry]=docker-registry
  [skopeo]=skopeo
  [umoci]=umoci
  [htpasswd]=apache2-utils
  [ip]=iproute2
  [iptables]=iptables
  [faketime]=faketime
  [prometheus]=prometheus
  [promtool]=prometheus
)

have() { if [[ "$1" == /* ]]; then [[ -x "$1" ]]; else command -v "$1" >/dev/null 2>&1; fi; }

missing=()
for cmd in "${!need[@]}"; do
  have "$cmd" || missing+=("${need[$cmd]}")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "node setup: all present" >&2
  exit 0
fi
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if [[ "${1:-}" == "--check" ]]; then
  echo "node setup: missing packages: ${missing[*]}" >&2
  exit 1
fi
if [[ "$(id -u)" != 0 ]]; then
  echo "node setup: missing packages (${missing[*]}) and not root; install them or run as root" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null; then
  echo "node setup: missing packages (${missing[*]}) and no apt-get on this machine" >&2
  exit 1
fi

start=$SECONDS
echo "node setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
# The registry package may start a system-wide instance on :5000 (systemd hosts); stop it.
if printf '%s\n' "${missing[@]}" | grep -qx docker-registry && command -v systemctl >/dev/null \
  && [[ -d /run/systemd/system ]]; then
  systemctl disable --now docker-registry >&2 2>/dev/null || true
fi
if printf '%s\n' "${missing[@]}" | grep -qx prometheus && command -v systemctl >/dev/null \
  && [[ -d /run/systemd/system ]]; then
  systemctl disable --now prometheus prometheus-node-exporter >&2 2>/dev/null || true
fi
for cmd in "${!need[@]}"; do
  have "$cmd" || { echo "node setup: $cmd still missing after install" >&2; exit 1; }
done
echo "node setup: installed in $((SECONDS - start))s" >&2
