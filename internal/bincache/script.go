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
	// Mtime is its modification time (Unix seconds) when it was read:
	// a file of the same size and time at its path on a host is taken
	// for it unread, as rsync's quick check does (see CheckArgv).
	Mtime int64
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
	return Binary{Path: path, Name: filepath.Base(path), Sum: hex.EncodeToString(h.Sum(nil)), Size: n, Mtime: fi.ModTime().Unix()}, nil
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
	// ModeAuto: a binary whose path on the host holds the same content is
	// run from there ("inplace"), not sent.
	ModeAuto = "auto"
	// ModeAlways: only a cached copy spares sending.
	ModeAlways = "always"
)

// The host's side, in POSIX sh. Every line it answers starts with Prefix
// and the host's name (the Slurm node's, else hostname), so that other
// output (srun's, a login banner) cannot pass for an answer.
//
// prelude resolves the cache dir ($1: "" for the default, "~/..." in the
// host's home) into $cache, checks sha256sum is there, and defines:
//   - say WORD INDEX REST...: one answer line
//   - sum FILE: sets $got to FILE's sha256 ("" when it cannot be read)
//   - settle INDEX PART SUM ENTRY: checks PART against SUM and moves it
//     into place as ENTRY, or removes it; answers ok when ENTRY then
//     holds SUM (whoever put it there: hosts may share a cache), else bad
//     (PART was not SUM) or fail (it could not be moved).
const prelude = `set -u
umask 077
host=${SLURMD_NODENAME:-$(hostname)}
say() { _w=$1 _i=$2; shift 2; printf '%s %s %s %s %s\n' ` + Prefix + ` "$host" "$_w" "$_i" "$(printf '%s' "$*" | tr '\n' ' ')"; }
cache=$1
case $cache in
'') cache=${XDG_CACHE_HOME:-$HOME/.cache}/monarch/bin ;;
'~/'*) cache=$HOME/${cache#'~/'} ;;
esac
command -v sha256sum >/dev/null 2>&1 || { say nosum - "no sha256sum in PATH ($PATH)"; exit 0; }
sum() { got=$(sha256sum <"$1" 2>/dev/null) || got=; got=${got%% *}; }
settle() {
	sum "$2"
	pg=$got err= n=
	if [ "$pg" = "$3" ]; then
		err=$(chmod 500 "$2" 2>&1 && mv -f "$2" "$4" 2>&1) || rm -f "$2"
	else
		n=$(wc -c <"$2" 2>/dev/null) || n=0
		rm -f "$2"
	fi
	sum "$4"
	if [ "$got" = "$3" ]; then
		say ok "$1" "$4"
	elif [ "$pg" != "$3" ]; then
		say bad "$1" "$pg" $n
	else
		say fail "$1" "$err"
	fi
}
`

// checkScript: $1 cache, $2 mode, then per binary SUM SIZE MTIME NAME
// PATH. For each (INDEX counts from 0) it answers:
//   - have I ENTRY: cached, checksum good (its directory is touched: a use)
//   - bad I GOT: cached but failing its checksum: removed
//   - inplace I HOW: ModeAuto, and PATH holds the same content: HOW is
//     "sha256" (read and hashed) or "size and time" (the same size and
//     modification time: not read)
//   - differs I WHAT: ModeAuto, and PATH holds something else
//   - need I: to be sent (its entry's directory is made, for sbcast)
//
// and first "dir - CACHE", the cache dir resolved. It creates nothing
// unless something is needed.
const checkScript = prelude + `mode=$2
shift 2
say dir - "$cache"
i=0
while [ $# -ge 5 ]; do
	s=$1 size=$2 mtime=$3 name=$4 path=$5
	shift 5
	d=$cache/$s e=$cache/$s/$name
	if [ -f "$e" ]; then
		sum "$e"
		if [ "$got" = "$s" ]; then
			touch "$d"
			say have $i "$e"
			i=$((i+1))
			continue
		fi
		rm -f "$e"
		say bad $i "$got"
	fi
	if [ "$mode" = auto ] && [ -f "$path" ] && [ -x "$path" ]; then
		st=$(stat -L -c '%s %Y' "$path" 2>/dev/null) || st=
		if [ "$st" = "$size $mtime" ]; then
			say inplace $i size and time
			i=$((i+1))
			continue
		fi
		if [ -n "$st" ] && [ "${st%% *}" != "$size" ]; then
			say differs $i "size ${st%% *}"
		else
			sum "$path"
			if [ "$got" = "$s" ]; then
				say inplace $i sha256
				i=$((i+1))
				continue
			fi
			say differs $i "sha256 $got"
		fi
	fi
	if err=$(mkdir -p "$d" 2>&1 && chmod 700 "$cache" "$d" 2>&1); then
		say need $i
	else
		say fail $i "$err"
	fi
	i=$((i+1))
done
`

// receiveScript: $1 cache, $2 INDEX, $3 SUM, $4 NAME; the binary on
// stdin. Answers as settle does, or fail with what went wrong writing it.
const receiveScript = prelude + `d=$cache/$3
e=$d/$4
t=$d/.$4.$$.part
if ! err=$(mkdir -p "$d" 2>&1 && chmod 700 "$cache" "$d" 2>&1); then
	say fail "$2" "$err"
elif ! err=$(cat 2>&1 >"$t"); then
	rm -f "$t"
	say fail "$2" "$err"
else
	settle "$2" "$t" "$3" "$e"
fi
`

// settleScript: $1 cache, $2 TAG, then per binary SUM NAME: settles each
// one's part (as Part names it). Without a part (another node sharing
// the cache settled it), the entry answers for itself: ok if its
// checksum is good, else missing.
const settleScript = prelude + `tag=$2
shift 2
i=0
while [ $# -ge 2 ]; do
	e=$cache/$1/$2
	t=$cache/$1/.$2.$tag.part
	if [ -f "$t" ]; then
		settle $i "$t" "$1" "$e"
	else
		sum "$e"
		if [ "$got" = "$1" ]; then say ok $i "$e"; else say missing $i "$t"; fi
	fi
	shift 2
	i=$((i+1))
done
`

// Prefix starts every answer line.
const Prefix = "monarch-ship"

// CheckArgv is the command that checks, on a host, which of bins its
// cache (dir: "" for the default) has, and in mode ModeAuto which its
// paths hold (paths[i]: bins[i]'s path there), as sh's argv. A file at
// its path of the same size and modification time as bins[i] is taken
// for it without being read (a shared filesystem's own file; rsync's
// quick check); one of another size is not it; else its sha256 decides.
// A cached copy is always read and hashed.
func CheckArgv(dir, mode string, bins []Binary, paths []string) []string {
	argv := []string{"sh", "-c", checkScript, Prefix, dir, mode}
	for i, b := range bins {
		argv = append(argv, b.Sum, strconv.FormatInt(b.Size, 10), strconv.FormatInt(b.Mtime, 10), b.Name, paths[i])
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
	Host  string // the host's own name for itself
	Word  string // dir, nosum, have, bad, inplace, differs, need, ok, fail, missing
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
