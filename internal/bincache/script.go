package bincache

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Binary is a file of this machine to have on the hosts.
type Binary struct {
	Path string // here
	Name string // its name in the cache: Path's base name
	Sum  string // sha256, hex
	Size int64
}

// Open reads the file at path and returns it as a Binary: its sha256 and
// size. It must be a regular file.
func Open(path string) (Binary, error) {
	f, err := os.Open(path)
	if err != nil {
		return Binary{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Binary{}, err
	}
	if !fi.Mode().IsRegular() {
		return Binary{}, fmt.Errorf("%s is not a regular file", path)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return Binary{}, fmt.Errorf("read %s: %w", path, err)
	}
	return Binary{Path: path, Name: filepath.Base(path), Sum: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

// Short is the sum as messages show it: its first 12 digits.
func Short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}

// Entry is where b is kept in the cache dir.
func Entry(dir string, b Binary) string { return dir + "/" + b.Sum + "/" + b.Name }

// Part is where b arrives in the cache dir before it is settled (Slurm's
// sbcast writes it there; SettleArgv moves it into place). tag tells
// apart the launchers that may send the same binary at once.
func Part(dir string, b Binary, tag string) string {
	return dir + "/" + b.Sum + "/." + b.Name + "." + tag + ".part"
}

// Modes of CheckArgv.
const (
	// ModeAuto: a binary whose path on the host holds the same content,
	// in folders no one else can write, is copied from there into the
	// cache ("copied"), not sent.
	ModeAuto = "auto"
	// ModeAlways: only a cached copy spares sending.
	ModeAlways = "always"
)

// The host's side, in POSIX sh. Every line it answers starts with Prefix
// and the host's name (the Slurm node's, else hostname), so that other
// output (srun's, a login banner) cannot pass for an answer.
//
// prelude checks its tools are there, resolves the cache dir ($1: "" for
// the default, "~/..." in the host's home) into $cache, made if missing,
// every symbolic link resolved, and stops at once (answering "unsafe -
// WHY") unless it and every folder above it keep the rule (see Safe). It
// defines:
//   - say WORD INDEX REST...: one answer line
//   - sum FILE: sets $got to FILE's sha256 ("" when it cannot be read)
//   - safe KINDS PATH [up]: fails, saying why in $why and which path in
//     $bad, unless PATH and, with "up", every folder above it keep the
//     rule: KINDS has a letter for PATH and may have one for each folder
//     above, f for a regular file and d for a directory; the folders
//     above those are directories that may be root's and sticky (u)
//   - keeps KIND PATH UID MODE OWNER: the rule on one path of safe's as
//     stat showed it (KIND f, d or u; MODE raw, in hex; OWNER a name for
//     $why)
//   - entry SUM NAME: sets $d, $e and $sf, the entry's directory, file
//     and stamp; fails if the file, its directory, the cache or a folder
//     above (one stat for all) breaks the rule, removing the directory or
//     the file that does
//   - held SUM: true when $e holds SUM: as its stamp says (unread), else
//     read and hashed ($got), then stamped
//   - settle PART SUM: checks PART against SUM and moves it into place as
//     $e, stamped, or removes it; sets $res to ok when $e then holds SUM
//     (whoever put it there: hosts may share a cache), else to bad (PART
//     was not SUM: $pg is its sum, $n its size) or fail ($err)
//
// safe reads every path it checks with one stat: the owner's uid, the
// raw mode (type and permissions, hex) and the owner's name. The stamps
// are stampFuncs'.
const prelude = `set -u
umask 077
host=${SLURMD_NODENAME:-$(hostname)}
nl='
'
say() {
	_w=$1 _i=$2
	shift 2
	_r=$*
	while case $_r in *"$nl"*) ;; *) false ;; esac; do _r=${_r%%"$nl"*}" "${_r#*"$nl"}; done
	printf '%s %s %s %s %s\n' ` + Prefix + ` "$host" "$_w" "$_i" "$_r"
}
for _t in sha256sum stat readlink id; do
	command -v $_t >/dev/null 2>&1 || { say notool - "no $_t in PATH ($PATH)"; exit 0; }
done
uid=$(id -u)
sum() { got=$(sha256sum <"$1" 2>/dev/null) || got=; got=${got%% *}; }
safe() {
	_k=$1 _p=$2 _up=${3:-} bad=
	set -- "$_p"
	while [ -n "$_up" ] && [ "$_p" != / ]; do
		_p=${_p%/*}
		[ -n "$_p" ] || _p=/
		set -- "$@" "$_p"
	done
	_st=$(stat -c '%u %f %U' -- "$@" 2>/dev/null) || { why="cannot look at $1 or a folder above it"; return 1; }
	while read -r _u _m _n; do
		_c=u
		case $_k in ?*)
			_c=${_k%"${_k#?}"}
			_k=${_k#?}
			;;
		esac
		keeps "$_c" "$1" "$_u" "$_m" "$_n" || { bad=$1; return 1; }
		shift
	done <<EOF
$_st
EOF
}
keeps() {
	_m=$((0x$4))
	_t=$((_m & 61440))
	if [ $_t = 40960 ]; then
		why="$2 is a symbolic link"
	elif [ $1 = f ] && [ $_t != 32768 ]; then
		why="$2 is not a regular file"
	elif [ $1 != f ] && [ $_t != 16384 ]; then
		why="$2 is not a directory"
	elif [ "$3" != "$uid" ] && [ "$3" != 0 ]; then
		why="$2 belongs to $5 (uid $3), not to you (uid $uid) or root"
	elif [ $((_m & 18)) != 0 ] && ! { [ $1 = u ] && [ "$3" = 0 ] && [ $((_m & 512)) != 0 ]; }; then
		why=$(printf '%s is writable by others (mode %04o)' "$2" $((_m & 4095)))
	else
		return 0
	fi
	return 1
}
` + stampFuncs + `entry() {
	d=$cache/$1 e=$cache/$1/$2 sf=$cache/$1/.$2.stamp
	if [ -e "$e" ] || [ -L "$e" ]; then
		safe fdd "$e" up && return 0
		case $bad in
		"$e") rm -rf -- "$e" "$sf" ;;
		"$d") rm -rf -- "$d" ;;
		esac
		return 1
	fi
	if { [ -e "$d" ] || [ -L "$d" ]; } && ! safe d "$d"; then
		rm -rf -- "$d"
		return 1
	fi
}
held() {
	fresh && return 0
	_was=$st
	sum "$e"
	[ "$got" = "$1" ] || return 1
	stamp "$_was"
	return 0
}
settle() {
	look "$1"
	_was=$st
	sum "$1"
	pg=$got err= n= res=fail
	if [ "$pg" != "$2" ]; then
		n=$(wc -c <"$1" 2>/dev/null) || n=0
		rm -f "$1"
		res=bad
	elif err=$(chmod 500 "$1" 2>&1 && mv -f "$1" "$e" 2>&1); then
		res=ok
		# The file hashed, unwritten since (chmod and mv change only its
		# ctime and mode): stamped as it is now.
		look "$e"
		[ -z "$_was" ] || [ "${_was% * * *}" != "${st% * * *}" ] || stamp "$st"
	else
		rm -f "$1"
		! held "$2" || res=ok
	fi
}
cache=$1
case $cache in
'') cache=${XDG_CACHE_HOME:-$HOME/.cache}/monarch/bin ;;
'~/'*) cache=$HOME/${cache#'~/'} ;;
esac
[ -d "$cache" ] || err=$(mkdir -p -- "$cache" 2>&1) || { say unsafe - "cannot make $cache: $err"; exit 0; }
cache=$(readlink -f -- "$cache") || { say unsafe - "cannot resolve $1"; exit 0; }
safe d "$cache" up || { say unsafe - "$why"; exit 0; }
`

// checkScript: $1 cache, $2 mode, then per binary SUM SIZE NAME PATH.
// First it answers "dir - CACHE", the cache dir resolved; then for each
// binary (INDEX counts from 0):
//   - have I ENTRY: cached, holding its sum: hashed, or as its stamp says
//     (its directory is touched: a use)
//   - bad I GOT: cached but failing its checksum: removed
//   - unsafe I WHY: its entry (directory or file) breaks the rule: removed
//   - copied I ENTRY: ModeAuto, and PATH keeps the rule and holds the
//     same content: copied into the cache (the copy is what was hashed)
//   - differs I WHAT: ModeAuto, and PATH holds something else ("size N",
//     "sha256 GOT")
//   - untrusted I WHY: ModeAuto, and PATH breaks the rule: not read
//   - need I: to be sent (its entry's directory is made, for sbcast)
//   - fail I WHY: its entry's directory cannot be made, or the copy failed
//
// A binary answers unsafe or bad, then one of the others.
const checkScript = prelude + `mode=$2
shift 2
say dir - "$cache"
i=0
while [ $# -ge 4 ]; do
	s=$1 size=$2 name=$3 path=$4
	shift 4
	t=$cache/$s/.$name.$$.part
	if ! entry "$s" "$name"; then
		say unsafe $i "$why"
	elif [ -f "$e" ]; then
		if held "$s"; then
			touch "$d"
			say have $i "$e"
			i=$((i+1))
			continue
		fi
		rm -f -- "$e" "$sf"
		say bad $i "$got"
	fi
	if [ "$mode" = auto ] && p=$(readlink -f -- "$path" 2>/dev/null) && [ -f "$p" ]; then
		n=$(stat -c %s -- "$p" 2>/dev/null) || n=
		if [ "$n" != "$size" ]; then
			say differs $i "size $n"
		elif ! safe f "$p" up; then
			say untrusted $i "$why"
		elif ! err=$(mkdir -p "$d" 2>&1 && cat -- "$p" 2>&1 >"$t"); then
			rm -f "$t"
			say fail $i "copy $p: $err"
			i=$((i+1))
			continue
		else
			settle "$t" "$s"
			case $res in
			ok) say copied $i "$e"; i=$((i+1)); continue ;;
			bad) say differs $i "sha256 $pg" ;;
			*) say fail $i "$err"; i=$((i+1)); continue ;;
			esac
		fi
	fi
	if err=$(mkdir -p "$d" 2>&1); then
		say need $i
	else
		say fail $i "$err"
	fi
	i=$((i+1))
done
`

// receiveScript: $1 cache, $2 INDEX, $3 SUM, $4 NAME; the binary on
// stdin. Answers ok I ENTRY, bad I GOT SIZE (it arrived as something
// else: removed), unsafe I WHY (the entry broke the rule: removed; send
// again) or fail I WHY.
const receiveScript = prelude + `t=$cache/$3/.$4.$$.part
if ! entry "$3" "$4"; then
	say unsafe "$2" "$why"
elif ! err=$(mkdir -p "$d" 2>&1); then
	say fail "$2" "$err"
elif ! err=$(cat 2>&1 >"$t"); then
	rm -f "$t"
	say fail "$2" "$err"
else
	settle "$t" "$3"
	case $res in
	ok) say ok "$2" "$e" ;;
	bad) say bad "$2" "$pg" $n ;;
	*) say fail "$2" "$err" ;;
	esac
fi
`

// settleScript: $1 cache, $2 TAG, then per binary SUM NAME: settles each
// one's part (as Part names it), answering as receive does. Without a
// part (another node sharing the cache settled it), the entry answers
// for itself: ok if its checksum is good, else missing.
const settleScript = prelude + `tag=$2
shift 2
i=0
while [ $# -ge 2 ]; do
	t=$cache/$1/.$2.$tag.part
	if ! entry "$1" "$2"; then
		say unsafe $i "$why"
	elif [ -f "$t" ]; then
		settle "$t" "$1"
		case $res in
		ok) say ok $i "$e" ;;
		bad) say bad $i "$pg" $n ;;
		*) say fail $i "$err" ;;
		esac
	else
		if held "$1"; then say ok $i "$e"; else say missing $i "$t"; fi
	fi
	shift 2
	i=$((i+1))
done
`

// Prefix starts every answer line.
const Prefix = "monarch-ship"

// CheckArgv is the command that checks, on a host, which of bins its
// cache (dir: "" for the default) has, and in mode ModeAuto which its
// paths hold (paths[i]: bins[i]'s path there), as sh's argv. Every check
// first checks the cache dir and every folder above it keep the rule
// (Safe), and every entry found: a copy is used only if it does and its
// sha256 is the binary's. In ModeAuto a file at a binary's path is taken
// only if it and every folder above it keep the rule, and only as a copy
// in the cache whose sha256 is the binary's: what the hosts run is always
// a cached copy. Nothing on this argv is secret, nor taken on trust.
func CheckArgv(dir, mode string, bins []Binary, paths []string) []string {
	argv := []string{"sh", "-c", checkScript, Prefix, dir, mode}
	for i, b := range bins {
		argv = append(argv, b.Sum, strconv.FormatInt(b.Size, 10), b.Name, paths[i])
	}
	return argv
}

// ReceiveArgv is the command that takes bins[i] on its stdin into a
// host's cache, as sh's argv.
func ReceiveArgv(dir string, i int, b Binary) []string {
	return []string{"sh", "-c", receiveScript, Prefix, dir, strconv.Itoa(i), b.Sum, b.Name}
}

// SettleArgv is the command that moves bins, sent as Part(dir, b, tag),
// into their places in a host's cache, as sh's argv.
func SettleArgv(dir, tag string, bins []Binary) []string {
	argv := []string{"sh", "-c", settleScript, Prefix, dir, tag}
	for _, b := range bins {
		argv = append(argv, b.Sum, b.Name)
	}
	return argv
}

// Reply is one answer of a host's script.
type Reply struct {
	Host string // the host's own name for itself
	// Word is dir, notool or unsafe (Index -1: of the cache itself); have,
	// bad, unsafe, copied, differs, untrusted, need or fail (check); ok,
	// bad, unsafe, fail or missing (receive, settle).
	Word  string
	Index int    // the binary's; -1 for none
	Rest  string // a path, a sha256, an error in the host's words
}

// Parse reads an answer line; false for any other line.
func Parse(line string) (Reply, bool) {
	f := strings.SplitN(strings.TrimRight(line, "\r\n"), " ", 5)
	if len(f) < 4 || f[0] != Prefix {
		return Reply{}, false
	}
	r := Reply{Host: f[1], Word: f[2], Index: -1}
	if f[3] != "-" {
		n, err := strconv.Atoi(f[3])
		if err != nil || n < 0 {
			return Reply{}, false
		}
		r.Index = n
	}
	if len(f) == 5 {
		r.Rest = strings.TrimSpace(f[4])
	}
	return r, true
}
