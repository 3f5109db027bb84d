#!/usr/bin/env bash
# Install Debian's Chromium (package chromium) for the dashboard's browser
# test and its README picture, if no chromium is on this machine yet.
# Root only; another apt-get may hold the dpkg lock: wait for it.
#
# Prints the browser's path on stdout. Exit status: 0 chromium runs; 3 it
# cannot be installed here (not root, no apt-get); anything else: the
# install failed.
set -euo pipefail

log() { printf 'browser/setup.sh: %s\n' "$*" >&2; }

found() {
	local b
	for b in chromium chromium-browser; do
		if command -v "$b" >/dev/null && "$b" --headless --no-sandbox --version >/dev/null 2>&1; then
			command -v "$b"
			return 0
		fi
	done
	return 1
}

if found; then
	exit 0
fi
((EUID == 0)) || { log "chromium missing; run this script as root to install it"; exit 3; }
command -v apt-get >/dev/null || { log "chromium missing and no apt-get"; exit 3; }
# One install at a time (test binaries may ask together).
exec 9>/tmp/monarch-browser-setup.lock
flock -w 1800 9
if ! found >/dev/null; then
	log "installing chromium (about 250 MB)"
	export DEBIAN_FRONTEND=noninteractive
	timeout 900 apt-get -o DPkg::Lock::Timeout=600 update >&2
	timeout 1500 apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends chromium fonts-dejavu-core >&2
fi
found
