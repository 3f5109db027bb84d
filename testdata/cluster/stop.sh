#!/usr/bin/env bash
# Stop the test cluster started by start.sh: slurmd's, slurmctld, munged, the
# sshd's and every process still running inside the hosts' namespaces; then
# delete the namespaces, veths and bridge. Idempotent: exits 0 when nothing
# runs. $BASE (logs, lock file) is kept.
set -euo pipefail

BASE=${BASE:-/tmp/monarch-cluster}
NS_PREFIX=${NS_PREFIX:-mon}
NHOSTS=${NHOSTS:-2}
LOCK_WAIT=${LOCK_WAIT:-900}
TERM_WAIT=${TERM_WAIT:-5}

log() { printf 'stop.sh: %s\n' "$*" >&2; }

[[ $BASE == /* ]] || {
	log "BASE must be an absolute path"
	exit 1
}
if ((EUID != 0)); then
	# start.sh runs only as root: without its namespaces nothing of it runs.
	for ((i = 1; i <= NHOSTS; i++)); do
		if [[ -e /run/netns/${NS_PREFIX}h$i ]]; then
			log "the cluster runs; stopping it needs root"
			exit 3
		fi
	done
	exit 0
fi

if [[ -z ${MONARCH_CLUSTER_LOCKED:-} && -d $BASE ]]; then
	MONARCH_CLUSTER_LOCKED=1 exec flock -o -w "$LOCK_WAIT" "$BASE/cluster.lock" "$BASH" "${BASH_SOURCE[0]}" "$@"
fi

# What start.sh created (it records the names first); the defaults cover a
# start.sh killed before that.
NAMESPACES="" VETHS="" BRIDGE="" OTHER_USER=${OTHER_USER:-monarch-other}
if [[ -r $BASE/run/names ]]; then
	# shellcheck source=/dev/null
	. "$BASE/run/names"
fi
for ((i = 1; i <= NHOSTS; i++)); do
	NAMESPACES+=" ${NS_PREFIX}h$i"
	VETHS+=" ${NS_PREFIX}vh$i"
done
read -r -a NAMESPACES <<<"$(tr ' ' '\n' <<<"$NAMESPACES" | sort -u | tr '\n' ' ')"
read -r -a VETHS <<<"$(tr ' ' '\n' <<<"$VETHS" | sort -u | tr '\n' ' ')"
BRIDGES=("${NS_PREFIX}br0")
[[ -n $BRIDGE && $BRIDGE != "${NS_PREFIX}br0" ]] && BRIDGES+=("$BRIDGE")

# Alive = exists and is not a zombie: PID 1 here may reap orphans only every
# few seconds and kill -0 succeeds on zombies, so waiting for them to vanish
# would take seconds per daemon.
alive() {
	local line rest
	read -r line 2>/dev/null </proc/"$1"/stat || return 1
	rest=${line##*) }
	[[ ${rest%% *} != [ZX] ]]
}

# Daemons of this cluster, found by pid file (checked against their name)
# and by a command line naming $BASE (pid files may be gone).
our_daemons() {
	local f pid comm
	for f in "$BASE"/run/*.pid "$BASE"/munge/run/munged.pid; do
		read -r pid 2>/dev/null <"$f" || continue
		[[ $pid =~ ^[0-9]+$ ]] || continue
		read -r comm 2>/dev/null </proc/"$pid"/comm || continue
		case $comm in munged | slurmctld | slurmd | sshd | sleep) echo "$pid" ;; esac
	done
	local d cmd
	for d in /proc/[0-9]*; do
		read -r comm 2>/dev/null <"$d/comm" || continue
		case $comm in munged | slurmctld | slurmd | slurmstepd | sshd) ;; *) continue ;; esac
		cmd=$(tr '\0' ' ' 2>/dev/null <"$d/cmdline") || continue
		[[ $cmd == *"$BASE/"* ]] && echo "${d#/proc/}"
	done
}

# Everything inside the hosts' network namespaces (slurmd, slurmstepd, tasks,
# sshd sessions, the namespace holders).
ns_procs() {
	local ns
	for ns in "${NAMESPACES[@]}"; do
		[[ -e /run/netns/$ns ]] && ip netns pids "$ns" 2>/dev/null
	done
	return 0
}

# Sessions of the loopback sshd (their processes outlive the listener).
lo_sessions() {
	local pid
	read -r pid 2>/dev/null <"$BASE/run/sshd-lo.pid" || return 0
	[[ $pid =~ ^[0-9]+$ ]] || return 0
	descendants "$pid"
}
descendants() {
	local want=" $1 " found=1 f line rest pid ppid
	declare -A kids=()
	while ((found)); do
		found=0
		for f in /proc/[0-9]*/stat; do
			read -r line 2>/dev/null <"$f" || continue
			pid=${line%% *}
			[[ -n ${kids[$pid]:-} ]] && continue
			rest=${line##*) }
			read -r _ ppid _ <<<"$rest"
			if [[ $want == *" $ppid "* ]]; then
				kids[$pid]=1
				want+="$pid "
				found=1
			fi
		done
	done
	((${#kids[@]})) && printf '%s\n' "${!kids[@]}"
	return 0
}

# Slurm clients (srun, salloc, sbatch) of this cluster: with it gone they
# would hang until their own timeouts.
clients() {
	local d comm env
	for d in /proc/[0-9]*; do
		read -r comm 2>/dev/null <"$d/comm" || continue
		case $comm in srun | salloc | sbatch) ;; *) continue ;; esac
		env=$(tr '\0' '\n' 2>/dev/null <"$d/environ") || continue
		[[ $'\n'$env$'\n' == *$'\n'"SLURM_CONF=$BASE/etc/slurm.conf"$'\n'* ]] && echo "${d#/proc/}"
	done
	return 0
}

# Never this script or what runs it (e.g. stop.sh run from an salloc shell).
declare -A SELF=()
p=$$
while [[ $p =~ ^[1-9][0-9]*$ && -z ${SELF[$p]:-} ]]; do
	SELF[$p]=1
	read -r line 2>/dev/null </proc/"$p"/stat || break
	rest=${line##*) }
	read -r _ p _ <<<"$rest"
done

# targets clients|all: the live processes to stop.
targets() {
	{
		local c
		for c in $(clients); do
			echo "$c"
			# salloc runs its command here, in the root namespaces
			descendants "$c"
		done
		if [[ $1 == all ]]; then
			lo_sessions
			our_daemons
			ns_procs
		fi
	} | sort -un | while read -r p; do
		[[ -n ${SELF[$p]:-} ]] && continue
		alive "$p" && echo "$p"
	done
	return 0
}

now_ms() { printf -v "$1" '%s' $((${EPOCHREALTIME/./} / 1000)); }

# kill_all clients|all SIGNAL MILLISECONDS: signal the targets (and
# newcomers, e.g. a slurmstepd forked meanwhile) until none is alive.
kill_all() {
	local set=$1 sig=$2 end now pids p comm
	declare -A sent=()
	now_ms end
	end=$((end + $3))
	while :; do
		mapfile -t pids < <(targets "$set")
		((${#pids[@]})) || return 0
		now_ms now
		((now <= end)) || return 1
		for p in "${pids[@]}"; do
			[[ -n ${sent[$p]:-} ]] && continue
			sent[$p]=1
			read -r comm 2>/dev/null </proc/"$p"/comm || continue
			# slurmstepd ignores SIGTERM (steps outlive a slurmd restart
			# by design)
			if [[ $comm == slurmstepd ]]; then
				kill -KILL "$p" 2>/dev/null || true
			else
				kill "-$sig" "$p" 2>/dev/null || true
			fi
		done
		sleep 0.1
	done
}

# Clients first, while slurmctld can still end their steps quickly.
kill_all clients TERM 1000 || kill_all clients KILL 2000 || true
if ! kill_all all TERM $((TERM_WAIT * 1000)); then
	log "still running after SIGTERM, sending SIGKILL: $(targets all | tr '\n' ' ')"
	if ! kill_all all KILL 3000; then
		log "could not kill: $(targets all | tr '\n' ' ')"
		exit 1
	fi
fi

# The other user start.sh made (its comment says so): its processes (a
# test's flood cut short), then the user. A user made by anyone else of
# that name is left alone.
if [[ $(getent passwd "$OTHER_USER" | cut -d: -f5) == "monarch test cluster, another user" ]]; then
	pkill -KILL -u "$OTHER_USER" 2>/dev/null || true
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		pgrep -u "$OTHER_USER" >/dev/null || break
		sleep 0.2
	done
	userdel "$OTHER_USER" 2>/dev/null || log "could not remove user $OTHER_USER"
fi

for ns in "${NAMESPACES[@]}"; do
	[[ -e /run/netns/$ns ]] && ip netns delete "$ns"
done
# Deleting a namespace deletes its veth pair, but asynchronously.
for v in "${VETHS[@]}" "${BRIDGES[@]}"; do
	if ip link show "$v" >/dev/null 2>&1; then
		ip link delete "$v" 2>/dev/null || true
	fi
done

# What jobs left in the ssh sessions' HOME (the default binary cache: a
# copy of every test binary shipped, tens of MB each).
rm -rf "$BASE/ssh/home"
rm -f "$BASE"/run/*.pid "$BASE/run/params" "$BASE/run/names" "$BASE/munge/run/munged.pid" \
	"$BASE/munge/run/munge.socket" "$BASE/munge/run/munge.socket.lock" "$BASE/cluster.env" "$BASE/env.sh"

for v in "${VETHS[@]}" "${BRIDGES[@]}"; do
	if ip link show "$v" >/dev/null 2>&1; then
		log "link $v still exists"
		exit 1
	fi
done
exit 0
