#!/usr/bin/env bash
# Install Debian's tmux for the tests of monarch top, if it is missing.
# Root only; another apt-get may hold the dpkg lock: wait for it.
#
# Exit status: 0 tmux runs; 3 it cannot be installed here (not root, no
# apt-get); anything else: the install failed.
set -euo pipefail

log() { printf 'tmux/setup.sh: %s\n' "$*" >&2; }

if tmux -V >/dev/null 2>&1; then
	exit 0
fi
((EUID == 0)) || { log "tmux missing; run this script as root to install it"; exit 3; }
command -v apt-get >/dev/null || { log "tmux missing and no apt-get"; exit 3; }
# One install at a time (test binaries may ask together).
exec 9>/tmp/monarch-tmux-setup.lock
flock -w 1800 9
if ! tmux -V >/dev/null 2>&1; then
	log "installing tmux"
	export DEBIAN_FRONTEND=noninteractive
	timeout 900 apt-get -o DPkg::Lock::Timeout=600 update >&2
	timeout 900 apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends tmux >&2
fi
tmux -V >/dev/null
