#!/usr/bin/env bash
# Start the test cluster: a real Slurm 22.05 (slurmctld + one slurmd per host)
# and real sshd's, with two "hosts" h1, h2 made of network + UTS + mount
# namespaces on this machine. Everything lives under $BASE; the machine's own
# /etc/hosts, /etc/slurm, /etc/munge and ~/.ssh are never touched.
#
# Exit status: 0 the cluster is up and healthy (already, or started now);
#              3 it cannot run here (not root, packages missing, no namespaces);
#              anything else: failure (logs under $BASE/log are printed).
# See README.md in this directory for the knobs.
set -euo pipefail

BASE=${BASE:-/tmp/monarch-cluster}
MODE=${MODE:-netns}
SUBNET=${SUBNET:-10.213.7}
NS_PREFIX=${NS_PREFIX:-mon}
NHOSTS=${NHOSTS:-2}
CPUS_PER_NODE=${CPUS_PER_NODE:-2}
SLURMCTLD_PORT=${SLURMCTLD_PORT:-16817}
SLURMD_PORT=${SLURMD_PORT:-16818}
LO_SSH_PORT=${LO_SSH_PORT:-2222}
START_TIMEOUT=${START_TIMEOUT:-60}
LOCK_WAIT=${LOCK_WAIT:-900}
KEEP_ON_FAILURE=${KEEP_ON_FAILURE:-0}
OTHER_USER=${OTHER_USER:-monarch-other}
OTHER_COMMENT="monarch test cluster, another user"

PACKAGES=(slurmctld slurmd slurm-client munge openssh-server)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

log() { printf 'start.sh: %s\n' "$*" >&2; }
cannot_run() { log "cannot run here: $*"; exit 3; }
die() { log "error: $*"; exit 1; }

# Accept both "10.213.7" and "10.213.7.0/24".
SUBNET=${SUBNET%.0/24}
[[ $SUBNET =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || die "SUBNET must look like 10.213.7 (a /24), got '$SUBNET'"
[[ $MODE == netns ]] || die "MODE=$MODE is not supported (only netns)"
[[ $NHOSTS =~ ^[1-9]$ ]] || die "NHOSTS must be 1..9"
[[ $NS_PREFIX =~ ^[a-z][a-z0-9]{0,9}$ ]] || die "NS_PREFIX must be 1-10 lowercase letters/digits"
[[ $BASE == /* && $BASE != *[[:space:]]* ]] || die "BASE must be an absolute path without spaces"
[[ $OTHER_USER =~ ^[a-z][a-z0-9-]{0,30}$ ]] || die "OTHER_USER must be 1-31 lowercase letters, digits or dashes"

# ---------------------------------------------------------------------------
# Preflight, before taking the lock: packages and namespace support.
missing_packages() {
	local p st
	for p in "${PACKAGES[@]}"; do
		st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
		[[ $st == installed ]] || printf '%s\n' "$p"
	done
	command -v ip >/dev/null || printf 'iproute2\n'
}

install_packages() {
	local created_policy=0
	# No init system manages these daemons here: keep the maintainer scripts
	# from starting the system-wide munged/sshd/slurm with /etc configs.
	if [[ ! -e /usr/sbin/policy-rc.d ]]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 0755 /usr/sbin/policy-rc.d
		created_policy=1
		trap 'rm -f /usr/sbin/policy-rc.d' EXIT
	fi
	log "installing: $*"
	export DEBIAN_FRONTEND=noninteractive
	# Another apt-get may hold the dpkg lock: wait for it instead of failing.
	timeout 900 apt-get -o DPkg::Lock::Timeout=600 update >&2
	timeout 900 apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "$@" >&2
	if ((created_policy)); then
		rm -f /usr/sbin/policy-rc.d
		trap - EXIT
	fi
}

if [[ -z ${MONARCH_CLUSTER_LOCKED:-} ]]; then
	mapfile -t missing < <(missing_packages)
	if ((${#missing[@]})); then
		if ((EUID != 0)); then
			cannot_run "packages missing (${missing[*]}); run this script as root to install them"
		fi
		install_packages "${missing[@]}"
	fi
	((EUID == 0)) || cannot_run "network namespaces need root (CAP_NET_ADMIN, CAP_SYS_ADMIN)"
	unshare --net --uts --mount true 2>/dev/null ||
		cannot_run "cannot create network/UTS/mount namespaces (unshare failed: no CAP_NET_ADMIN/CAP_SYS_ADMIN?)"
	mkdir -p "$BASE"
	# One start/stop at a time (tests in several packages start the cluster
	# concurrently). -o: the daemons started below must not inherit the lock.
	MONARCH_CLUSTER_LOCKED=1 exec flock -o -w "$LOCK_WAIT" "$BASE/cluster.lock" "$BASH" "${BASH_SOURCE[0]}" "$@"
fi
export MONARCH_CLUSTER_LOCKED

# ---------------------------------------------------------------------------
# Names and addresses.
ADVERTISE=$SUBNET.1
BRIDGE=${NS_PREFIX}br0
SHORTHOST=$(hostname -s)
HOSTS=() NSS=() VETHS=() ADDRS=()
for ((i = 1; i <= NHOSTS; i++)); do
	HOSTS+=("h$i")
	NSS+=("${NS_PREFIX}h$i")
	VETHS+=("${NS_PREFIX}vh$i")
	ADDRS+=("$SUBNET.$((10 + i))")
done

export SLURM_CONF=$BASE/etc/slurm.conf
SSH_CONFIG=$BASE/ssh/ssh_config
SSH_KEY=$BASE/ssh/id_ed25519
PARTITION=debug
PARAMS="mode=$MODE subnet=$SUBNET prefix=$NS_PREFIX hosts=$NHOSTS cpus=$CPUS_PER_NODE ports=$SLURMCTLD_PORT,$SLURMD_PORT,$LO_SSH_PORT ctld=$SHORTHOST other=$OTHER_USER"

# until_deadline WHAT CMD...: poll CMD until it succeeds; all waits share
# one START_TIMEOUT.
DEADLINE=$((SECONDS + START_TIMEOUT))
until_deadline() {
	local what=$1
	shift
	while ! "$@" >/dev/null 2>&1; do
		((SECONDS < DEADLINE)) || {
			log "timed out after ${START_TIMEOUT}s waiting for: $what"
			return 1
		}
		sleep 0.1
	done
}
remaining() {
	local r=$((DEADLINE - SECONDS))
	((r > 1)) || r=1
	echo "$r"
}

# A pid is alive if it exists and is not a zombie: PID 1 here may reap
# orphans only every few seconds, and kill -0 succeeds on zombies.
alive() {
	local line rest
	read -r line 2>/dev/null </proc/"$1"/stat || return 1
	rest=${line##*) }
	[[ ${rest%% *} != [ZX] ]]
}
# pidfile_alive FILE COMM: the daemon named in FILE runs and is COMM.
pidfile_alive() {
	local pid comm
	read -r pid 2>/dev/null <"$1" || return 1
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	read -r comm 2>/dev/null </proc/"$pid"/comm || return 1
	[[ $comm == "$2" ]] && alive "$pid"
}

ssh_hostname_is() { [[ $(timeout 10 ssh -F "$SSH_CONFIG" "$1" hostname 2>/dev/null) == "$2" ]]; }
# ssh to lo and every host works (in parallel: ~0.3 s each).
ssh_all_ok() {
	local pids=() ok=0 p h
	ssh_hostname_is lo "$(hostname)" &
	pids+=($!)
	for h in "${HOSTS[@]}"; do
		ssh_hostname_is "$h" "$h" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || ok=1; done
	return "$ok"
}

ctld_up() { [[ $(timeout 5 scontrol ping 2>/dev/null) == *"is UP"* ]]; }

# ---------------------------------------------------------------------------
# Fast path: already up and healthy with the same parameters.
healthy() {
	[[ -f $BASE/cluster.env && -f $BASE/run/params ]] || return 1
	[[ $(<"$BASE/run/params") == "$PARAMS" ]] || return 1
	pidfile_alive "$BASE/munge/run/munged.pid" munged || return 1
	pidfile_alive "$BASE/run/slurmctld.pid" slurmctld || return 1
	pidfile_alive "$BASE/run/sshd-lo.pid" sshd || return 1
	local i h
	for i in "${!HOSTS[@]}"; do
		h=${HOSTS[i]}
		[[ -e /run/netns/${NSS[i]} ]] || return 1
		pidfile_alive "$BASE/run/holder-$h.pid" sleep || return 1
		pidfile_alive "$BASE/run/slurmd-$h.pid" slurmd || return 1
		pidfile_alive "$BASE/run/sshd-$h.pid" sshd || return 1
	done
	ctld_up || return 1
	getent passwd "$OTHER_USER" >/dev/null || return 1
	# Every node responding (jobs of other tests may be running on them).
	local states
	states=$(timeout 5 sinfo -h -N -p "$PARTITION" -o '%N %t' 2>/dev/null) || return 1
	[[ $(grep -cE ' (idle|mix|alloc|comp)$' <<<"$states") == "$NHOSTS" ]] || return 1
	ssh_all_ok
}

if healthy; then
	log "cluster already up under $BASE"
	exit 0
fi

# ---------------------------------------------------------------------------
# Cold start. Whatever is half up is stopped first.
BASE=$BASE NS_PREFIX=$NS_PREFIX NHOSTS=$NHOSTS "$HERE/stop.sh" >&2

dump_logs() {
	local f
	for f in "$BASE"/log/*.log "$BASE"/munge/log/*.log; do
		[[ -s $f ]] || continue
		printf '==> %s (last 30 lines) <==\n' "$f" >&2
		tail -n 30 "$f" >&2
	done
}
on_exit() {
	local rc=$?
	((rc == 0)) && return
	log "start failed (status $rc); logs follow"
	dump_logs
	if [[ $KEEP_ON_FAILURE != 1 ]]; then
		BASE=$BASE NS_PREFIX=$NS_PREFIX NHOSTS=$NHOSTS "$HERE/stop.sh" >&2 || true
	fi
	exit "$rc"
}
trap on_exit EXIT

# Clashes with someone else's cluster are reported, not fought over.
port_free() { [[ -z $(ss -Hltn "sport = :$1") ]]; }
port_free "$SLURMCTLD_PORT" || die "port $SLURMCTLD_PORT (SLURMCTLD_PORT) is in use"
port_free "$LO_SSH_PORT" || die "port $LO_SSH_PORT (LO_SSH_PORT) is in use"
while read -r line; do
	[[ $line == *" $BRIDGE "* ]] || die "subnet $SUBNET.0/24 is already used on this machine (set SUBNET=...): $line"
done < <(ip -o -4 addr show to "$SUBNET.0/24")

umask 022
rm -rf "$BASE"/{etc,state,spool,run,log,munge,ssh} "$BASE/cluster.env" "$BASE/env.sh"
mkdir -p "$BASE"/{etc,state,spool,run,log,ssh/home}
# slurmd logs an error if its spool dir (the step sockets' home) is missing
for h in "${HOSTS[@]}"; do mkdir -p "$BASE/spool/slurmd-$h"; done
# sshd refuses to start without its privilege separation directory.
mkdir -p /run/sshd
chmod 0755 /run/sshd
# What stop.sh must tear down, written before anything is created.
cat >"$BASE/run/names" <<EOF
NAMESPACES="${NSS[*]}"
VETHS="${VETHS[*]}"
BRIDGE=$BRIDGE
EOF

# --- another user of the nodes ----------------------------------------------
# Security tests act as an unprivileged user who shares the hosts with the
# job's (they plant, squat, flood and read ps as it). The hosts share this
# machine's /etc/passwd. stop.sh removes the user if this script made it
# (by its comment).
if ! getent passwd "$OTHER_USER" >/dev/null; then
	useradd --system --user-group --no-create-home --home-dir /nonexistent \
		--shell /usr/sbin/nologin --comment "$OTHER_COMMENT" "$OTHER_USER" || die "useradd $OTHER_USER failed"
fi
echo "OTHER_USER=$OTHER_USER" >>"$BASE/run/names"
OTHER_UID=$(id -u "$OTHER_USER")
OTHER_GID=$(id -g "$OTHER_USER")
((OTHER_UID != 0)) || die "OTHER_USER $OTHER_USER is root"

# --- config files ----------------------------------------------------------
{
	echo "127.0.0.1 localhost"
	if [[ $SHORTHOST == vm ]]; then
		echo "$ADVERTISE vm"
	else
		echo "$ADVERTISE $SHORTHOST vm"
	fi
	for i in "${!HOSTS[@]}"; do echo "${ADDRS[i]} ${HOSTS[i]}"; done
} >"$BASE/etc/hosts.ns"

# More CPUs/memory than the machine has are fine: config_overrides keeps
# slurmd from marking the node INVAL, and tests need only a few tasks.
cat >"$SLURM_CONF" <<EOF
# generated by testdata/cluster/start.sh
ClusterName=monarch
SlurmctldHost=$SHORTHOST($ADVERTISE)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$BASE/munge/run/munge.socket
SlurmctldPort=$SLURMCTLD_PORT
SlurmdPort=$SLURMD_PORT
StateSaveLocation=$BASE/state
SlurmdSpoolDir=$BASE/spool/slurmd-%n
SlurmctldPidFile=$BASE/run/slurmctld.pid
SlurmdPidFile=$BASE/run/slurmd-%n.pid
SlurmctldLogFile=$BASE/log/slurmctld.log
SlurmdLogFile=$BASE/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=60
Waittime=0
# impossible requests (too many nodes/CPUs, bad partition) fail at once
# instead of pending forever
EnforcePartLimits=ALL

EOF
for i in "${!HOSTS[@]}"; do
	echo "NodeName=${HOSTS[i]} NodeHostname=${HOSTS[i]} NodeAddr=${ADDRS[i]} CPUs=$CPUS_PER_NODE RealMemory=2048 State=UNKNOWN" >>"$SLURM_CONF"
done
echo "PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO" >>"$SLURM_CONF"

# ssh: one client key, one host key and config per sshd.
ssh-keygen -q -t ed25519 -N '' -C monarch-test -f "$SSH_KEY"
cp "$SSH_KEY.pub" "$BASE/ssh/authorized_keys"
sshd_config() { # name listen
	mkdir -p "$BASE/ssh/$1"
	ssh-keygen -q -t ed25519 -N '' -C "monarch-test-$1" -f "$BASE/ssh/$1/ssh_host_ed25519_key"
	cat >"$BASE/ssh/$1/sshd_config" <<EOF
ListenAddress $2
HostKey $BASE/ssh/$1/ssh_host_ed25519_key
PidFile $BASE/run/sshd-$1.pid
AuthorizedKeysFile $BASE/ssh/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
# keys live under /tmp, which is world-writable
StrictModes no
PrintMotd no
PrintLastLog no
X11Forwarding no
AcceptEnv MONARCH_* LANG LC_*
MaxStartups 100:30:200
MaxSessions 100
# an empty HOME: root's ~/.bashrc (sourced by bash for ssh commands) can
# take seconds per command
SetEnv HOME=$BASE/ssh/home
Subsystem sftp internal-sftp
EOF
	/usr/sbin/sshd -t -f "$BASE/ssh/$1/sshd_config"
}
sshd_config lo "127.0.0.1:$LO_SSH_PORT"
for i in "${!HOSTS[@]}"; do sshd_config "${HOSTS[i]}" "${ADDRS[i]}:22"; done

{
	cat <<EOF
# generated by testdata/cluster/start.sh; use with ssh -F
Host *
  User root
  IdentityFile $SSH_KEY
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
  BatchMode yes
  ConnectTimeout 5
  SendEnv MONARCH_*
Host lo
  HostName 127.0.0.1
  Port $LO_SSH_PORT
EOF
	for i in "${!HOSTS[@]}"; do
		printf 'Host %s\n  HostName %s\n' "${HOSTS[i]}" "${ADDRS[i]}"
	done
} >"$SSH_CONFIG"

# --- network: a bridge for this machine, a veth into each host's netns ------
ip link add "$BRIDGE" type bridge 2>/dev/null || cannot_run "cannot create bridge $BRIDGE"
ip addr add "$ADVERTISE/24" dev "$BRIDGE"
ip link set "$BRIDGE" up
for i in "${!HOSTS[@]}"; do
	ns=${NSS[i]} veth=${VETHS[i]}
	ip netns add "$ns" || cannot_run "cannot create network namespace $ns"
	ip link add "$veth" type veth peer name eth0 netns "$ns" 2>/dev/null || cannot_run "cannot create veth $veth"
	ip link set "$veth" master "$BRIDGE" up
	ip -n "$ns" addr add "${ADDRS[i]}/24" dev eth0
	ip -n "$ns" link set eth0 up
	ip -n "$ns" link set lo up
done

# --- munge -----------------------------------------------------------------
install -d -m 0700 "$BASE"/munge/{etc,lib,log}
install -d -m 0755 "$BASE/munge/run"
mungekey --create --keyfile="$BASE/munge/etc/munge.key"
chmod 0600 "$BASE/munge/etc/munge.key"
munged --key-file="$BASE/munge/etc/munge.key" --socket="$BASE/munge/run/munge.socket" \
	--pid-file="$BASE/munge/run/munged.pid" --log-file="$BASE/munge/log/munged.log" \
	--seed-file="$BASE/munge/lib/munged.seed"
munge_ok() { munge -S "$BASE/munge/run/munge.socket" -n | unmunge -S "$BASE/munge/run/munge.socket"; }
until_deadline munged munge_ok

# --- hosts -----------------------------------------------------------------
# A holder process per host owns its UTS + mount namespaces (hostname hN,
# /etc/hosts bind-mounted from hosts.ns); daemons join it with nsenter.
# Not `ip netns exec`: it remounts /sys, hiding /sys/fs/cgroup, and slurmd
# then fails to initialise its cgroup plugin.
for i in "${!HOSTS[@]}"; do
	h=${HOSTS[i]}
	setsid nsenter --net="/run/netns/${NSS[i]}" unshare --uts --mount --propagation private \
		sh -c 'mount --bind "$1" /etc/hosts && hostname "$2" && exec sleep infinity' \
		holder "$BASE/etc/hosts.ns" "$h" </dev/null >"$BASE/log/holder-$h.log" 2>&1 &
	echo $! >"$BASE/run/holder-$h.pid"
done
for h in "${HOSTS[@]}"; do
	until_deadline "namespaces of $h" pidfile_alive "$BASE/run/holder-$h.pid" sleep
done
in_host() { # host cmd...
	local pid
	pid=$(<"$BASE/run/holder-$1.pid")
	shift
	nsenter -t "$pid" --net --uts --mount -- "$@"
}

# --- daemons ---------------------------------------------------------------
slurmctld -f "$SLURM_CONF"
/usr/sbin/sshd -f "$BASE/ssh/lo/sshd_config" -E "$BASE/log/sshd-lo.log"
for h in "${HOSTS[@]}"; do
	in_host "$h" slurmd -f "$SLURM_CONF" -N "$h"
	in_host "$h" /usr/sbin/sshd -f "$BASE/ssh/$h/sshd_config" -E "$BASE/log/sshd-$h.log"
done

# --- health ----------------------------------------------------------------
until_deadline slurmctld ctld_up
nodes_idle() {
	local out
	out=$(timeout 5 sinfo -h -N -p "$PARTITION" -o '%N %t') || return 1
	[[ $(grep -c ' idle$' <<<"$out") == "$NHOSTS" ]]
}
until_deadline "nodes ${HOSTS[*]} idle" nodes_idle

want=$(printf '%s\n' "${HOSTS[@]}")
got=$(timeout "$(remaining)" srun -N"$NHOSTS" hostname | sort) || die "srun -N$NHOSTS hostname failed"
[[ $got == "$want" ]] || die "srun -N$NHOSTS hostname printed '$got', want '$want'"

until_deadline "ssh to lo ${HOSTS[*]}" ssh_all_ok

# --- what clients read -----------------------------------------------------
cat >"$BASE/cluster.env" <<EOF
BASE=$BASE
SLURM_CONF=$SLURM_CONF
SSH_CONFIG=$SSH_CONFIG
SSH_KEY=$SSH_KEY
HOSTS="${HOSTS[*]}"
ADDRS="${ADDRS[*]}"
ADVERTISE=$ADVERTISE
PARTITION=$PARTITION
OTHER_USER=$OTHER_USER
OTHER_UID=$OTHER_UID
OTHER_GID=$OTHER_GID
EOF
cat >"$BASE/env.sh" <<EOF
# . $BASE/env.sh   -- then srun/sinfo/... and ssh -F "\$SSH_CONFIG" h1 use the test cluster
export SLURM_CONF=$SLURM_CONF
export SSH_CONFIG=$SSH_CONFIG
export SSH_KEY=$SSH_KEY
export CLUSTER_HOSTS="${HOSTS[*]}"
export CLUSTER_ADVERTISE=$ADVERTISE
export CLUSTER_PARTITION=$PARTITION
export CLUSTER_OTHER_USER=$OTHER_USER
EOF
echo "$PARAMS" >"$BASE/run/params"
log "cluster up under $BASE in ${SECONDS}s: hosts ${HOSTS[*]}, slurmctld $ADVERTISE:$SLURMCTLD_PORT, ssh lo=127.0.0.1:$LO_SSH_PORT"
