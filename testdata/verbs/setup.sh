#!/usr/bin/env bash
# Install libibverbs-dev (rdma-core's verbs headers and library) so that
# the verbs backend builds (go build -tags verbs ./ibverbs), if it is
# missing. Root only; another apt-get may hold the dpkg lock: wait for it.
#
# Exit status: 0 the headers are there; 3 they cannot be installed here
# (not root, no apt-get); anything else: the install failed.
set -euo pipefail

log() { printf 'verbs/setup.sh: %s\n' "$*" >&2; }

if [[ -f /usr/include/infiniband/verbs.h ]]; then
	exit 0
fi
((EUID == 0)) || { log "libibverbs-dev missing; run this script as root to install it"; exit 3; }
command -v apt-get >/dev/null || { log "libibverbs-dev missing and no apt-get"; exit 3; }
exec 9>/tmp/monarch-verbs-setup.lock
flock -w 1800 9
if [[ ! -f /usr/include/infiniband/verbs.h ]]; then
	log "installing libibverbs-dev"
	export DEBIAN_FRONTEND=noninteractive
	timeout 900 apt-get -o DPkg::Lock::Timeout=600 update >&2
	timeout 900 apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends libibverbs-dev >&2
fi
test -f /usr/include/infiniband/verbs.h
