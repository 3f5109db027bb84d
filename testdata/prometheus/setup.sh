#!/usr/bin/env bash
# Install Debian's Prometheus server (package prometheus) for the metrics
# tests, if there is no prometheus on $PATH yet. Root only; another
# apt-get may hold the dpkg lock: wait for it.
#
# The package would start a system service (a prometheus daemon on
# :9090, scraping itself): the install runs under a policy-rc.d that
# forbids starting services, and a prometheus that the install started
# anyway (one that was not running before it) is stopped and the
# service disabled. The tests start their own prometheus, on loopback,
# on a port of their own (internal/promtest).
#
# Exit status: 0 prometheus runs; 3 it cannot be installed here (not
# root, no apt-get); anything else: the install failed.
set -euo pipefail

log() { printf 'prometheus/setup.sh: %s\n' "$*" >&2; }

works() { command -v prometheus >/dev/null && timeout 20 prometheus --version >/dev/null 2>&1; }

if works; then
	exit 0
fi
((EUID == 0)) || { log "prometheus missing; run this script as root to install it"; exit 3; }
command -v apt-get >/dev/null || { log "prometheus missing and no apt-get"; exit 3; }
# One install at a time (test binaries may ask together).
exec 9>/tmp/monarch-prometheus-setup.lock
flock -w 1800 9
if ! works; then
	log "installing prometheus"
	export DEBIAN_FRONTEND=noninteractive
	before=$(pgrep -x prometheus || true)
	policy=/usr/sbin/policy-rc.d
	own_policy=
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\n# monarch testdata/prometheus/setup.sh: no services started during its install\nexit 101\n' >"$policy"
		chmod 755 "$policy"
		own_policy=1
	fi
	status=0
	{
		timeout 900 apt-get -o DPkg::Lock::Timeout=600 update >&2 &&
			timeout 1500 apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends prometheus >&2
	} || status=$?
	[[ -n $own_policy ]] && rm -f "$policy"
	# Whatever the install started, stop: a daemon the tests did not ask for.
	if command -v systemctl >/dev/null && [[ -d /run/systemd/system ]]; then
		systemctl disable --now prometheus.service >/dev/null 2>&1 || true
	elif [[ -x /etc/init.d/prometheus ]]; then
		timeout 30 /etc/init.d/prometheus stop >/dev/null 2>&1 || true
	fi
	for pid in $(pgrep -x prometheus || true); do
		if ! grep -qx "$pid" <<<"$before"; then
			log "stopping prometheus $pid, which the install started"
			kill "$pid" 2>/dev/null || true
		fi
	done
	((status == 0)) || exit "$status"
fi
works
