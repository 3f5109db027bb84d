package bincache

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// A stamp spares reading a cached copy again: once an entry is found to
// hold its sum (hashed as it arrived, or at a use), the scripts record
// beside it, in its private directory, the file as stat shows it then
// (stampFuncs); a later use that finds the same (and the entry, its
// directory and the folders above still keeping the rule) takes the
// entry as holding its sum, unread. See the package doc for why that
// holds.

// stampFormat is stat's format of a stamp: device, inode, size, mtime
// and ctime (with nanoseconds), owner's uid, raw mode (hex).
const stampFormat = "%d %i %s %.9Y %.9Z %u %f"

// stampMax bounds what is read of a stamp file: a stamp is one line,
// "v1 " and a stamp line, far shorter.
const stampMax = 256

// stampFuncs defines the scripts' stamps (in the prelude, after keeps):
//   - look FILE: sets $st to FILE's stamp line, as stat shows it; "" when
//     it cannot be had: no such file, or a stat (or a filesystem) that
//     does not give times in nanoseconds
//   - shaped LINE: true when LINE is a stamp line (look's check)
//   - fresh: true when $e is what its stamp $sf says, the stamp keeping
//     the rule (keeps f); $st is $e as look sees it now. A stamp that is
//     missing, not a file, not the user's or root's, writable by others,
//     or anything but the one line "v1 " $st is no stamp. One stat looks
//     at both.
//   - stamp LINE: records LINE (look's; "": nothing) as $e's stamp $sf,
//     atomically; quietly nothing when it cannot be written
const stampFuncs = `look() {
	st=$(stat -c '` + stampFormat + `' -- "$1" 2>/dev/null) || st=
	shaped "$st" || st=
}
shaped() {
	case $1 in ''|*[!0-9a-f.\ ]*) return 1 ;; esac
	set -- $1
	[ $# = 7 ] || return 1
	for _f in "$1" "$2" "$3" "$6"; do
		case $_f in *[!0-9]*) return 1 ;; esac
	done
	for _f in "$4" "$5"; do
		case $_f in
		.*|*.*.*|*[!0-9.]*) return 1 ;;
		*.[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]) ;;
		*) return 1 ;;
		esac
	done
	[ "${4#*.}${5#*.}" != 000000000000000000 ] || return 1
	case $7 in *[!0-9a-f]*) return 1 ;; esac
}
fresh() {
	_l=$(stat -c '` + stampFormat + `' -- "$e" "$sf" 2>/dev/null)
	st=${_l%%"$nl"*} _s=
	case $_l in *"$nl"*) _s=${_l#*"$nl"} ;; esac
	shaped "$st" || { st=; return 1; }
	shaped "$_s" || return 1
	set -- $_s
	keeps f "$sf" "$6" "$7" "uid $6" && [ "$3" = $((${#st} + 4)) ] && IFS= read -r _l <"$sf" && [ "$_l" = "v1 $st" ]
}
stamp() {
	[ -n "$1" ] || return 0
	{ printf 'v1 %s\n' "$1" >"$sf.$$" && mv -f -- "$sf.$$" "$sf"; } 2>/dev/null || rm -f -- "$sf.$$"
}
`

// stampLine is the stamp line of a file as st (its stat) shows it, as
// the scripts' look writes it; false where look would have none: times in
// whole seconds (a filesystem without finer ones), or before 1970.
func stampLine(st *syscall.Stat_t) (string, bool) {
	if st.Mtim.Sec < 0 || st.Ctim.Sec < 0 || st.Mtim.Nsec == 0 && st.Ctim.Nsec == 0 {
		return "", false
	}
	return fmt.Sprintf("%d %d %d %d.%09d %d.%09d %d %x", uint64(st.Dev), st.Ino, st.Size,
		st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec, st.Uid, st.Mode), true
}

// stampSays is whether data, a stamp file's content, says line, as the
// scripts' fresh reads it: it is that one line.
func stampSays(data []byte, line string) bool {
	return line != "" && string(data) == "v1 "+line+"\n"
}

// StampPath is where the stamp of entry (a cached copy: dir/sum/name) is
// kept: dir/sum/.name.stamp.
func StampPath(entry string) string {
	return filepath.Join(filepath.Dir(entry), "."+filepath.Base(entry)+".stamp")
}

// stamped is whether the open file f, at real, is a cached copy whose
// stamp says it holds sum: real is an entry (its directory is named sum,
// the user's or root's and writable by no one else: no sticky exception),
// and its stamp keeps the rule and describes f as fstat shows it now.
// Anything else is false: the caller hashes.
func stamped(f *os.File, real, sum string) bool {
	dir := filepath.Dir(real)
	if filepath.Base(dir) != sum {
		return false
	}
	if di, err := os.Lstat(dir); err != nil || keeps(dir, di, false) != nil || di.Mode().Perm()&0o022 != 0 {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	line, ok := stampLine(st)
	if !ok {
		return false
	}
	path := StampPath(real)
	// O_NONBLOCK: a fifo there does not block the open (and is no file).
	s, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer s.Close()
	si, err := s.Stat()
	if err != nil || keeps(path, si, true) != nil {
		return false
	}
	data, err := io.ReadAll(io.LimitReader(s, stampMax+1))
	return err == nil && stampSays(data, line)
}
