#!/usr/bin/env bash
# Install Debian's PyTorch (python3-torch: CPU, gloo) for the SPMD tests,
# if /usr/bin/python3 cannot import torch yet. Root only; another apt-get
# may hold the dpkg lock: wait for it.
#
# Exit status: 0 torch imports; 3 it cannot be installed here (not root,
# no apt-get); anything else: the install failed.
set -euo pipefail

log() { printf 'torch/setup.sh: %s\n' "$*" >&2; }

if /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
	exit 0
fi
((EUID == 0)) || { log "python3-torch missing; run this script as root to install it"; exit 3; }
command -v apt-get >/dev/null || { log "python3-torch missing and no apt-get"; exit 3; }
# One install at a time (test binaries may ask together).
exec 9>/tmp/monarch-torch-setup.lock
flock -w 1800 9
if ! /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
	log "installing python3-torch (about 200 MB)"
	export DEBIAN_FRONTEND=noninteractive
	timeout 900 apt-get -o DPkg::Lock::Timeout=600 update >&2
	timeout 1500 apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends python3-torch >&2
fi
/usr/bin/python3 -c 'import torch.distributed'
