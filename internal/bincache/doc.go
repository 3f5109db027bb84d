// Package bincache is the cache of binaries a launcher sends to its
// hosts (the job's program, the monarch binary), kept on each host under
// their content's sha256:
//
//	<dir>/<sha256>/<name>     the binary, mode 0500, in a 0700 directory
//	<dir>/<sha256>/.<name>.stamp        the binary as stat saw it when it was hashed
//	<dir>/<sha256>/.<name>.<tag>.part   one on its way (removed once settled)
//
// <dir> is the hosts file's [ship] cache, by default
// ~/.cache/monarch/bin ($XDG_CACHE_HOME/monarch/bin where that is set),
// as the host's own environment says. An entry is found by content, so a
// job whose binary has not changed finds it there and sends nothing; one
// whose binary changed sends the new one beside the old.
//
// # On the hosts
//
// The hosts run nothing of monarch's until the binaries are there (the
// monarch binary may be one of them), so the host's side is plain POSIX
// sh with sha256sum, stat, readlink, cat, mv and mkdir: scripts this
// package writes (CheckArgv, ReceiveArgv, SettleArgv) and a launcher runs
// over ssh or as an srun step. Each answers with lines Parse reads:
//
//	monarch-ship HOST WORD INDEX [REST]
//
// # What is trusted
//
// The hosts may be shared with other users, who must not get the job to
// run a program of theirs. So a binary is run only if it is what the
// launcher has, in a place no one else can change:
//
//   - The rule (Safe; the scripts' safe): a file, with every symbolic
//     link resolved, it and every folder above it belong to the user or
//     to root, and no one else may write to any of them. The one
//     exception: a folder above that root owns with the sticky bit set
//     (/tmp, /var/tmp, /dev/shm): others may add to it, but the kernel
//     lets no one but its owner rename or remove an entry of ours there,
//     and what lies below must keep the rule. The cache folder itself may
//     not be such a folder: others could make its entries first.
//   - Every script checks the cache folder and every folder above it
//     first, and stops ("unsafe") if they break the rule: nothing is read
//     from it or written to it, and the launch fails.
//   - Every cached copy is checked against the rule (its entry's folder
//     and file) each time it is used, and must hold its sha256: hashed,
//     or unread when its stamp says it is the file found to hold it (see
//     Stamps). One that fails is refused and removed. One that arrives is
//     hashed before it is renamed into place (atomically, in its own
//     folder); one that fails is removed and never run.
//   - A file at a binary's own path on a host (ModeAuto) is not run from
//     there: if it keeps the rule and its size is the binary's, it is
//     copied into the cache, and the copy is hashed; what the hosts run
//     is that copy. One that breaks the rule is not read ("untrusted"),
//     and the binary is sent. Nothing on a script's argv (sums, sizes,
//     paths) is taken on trust, so that ps shows it matters not.
//   - Where the program runs, the host agent opens it once (OpenProgram),
//     checks the rule again on the open file and its folders, hashes the
//     descriptor against the sum the launcher sent (or takes a cached
//     copy's stamp for it, checked against the open file), and starts
//     every proc from that descriptor (ExecPath), never again from the
//     path: what runs is what was checked.
//
// What the rule leaves open: the user's own processes and root, who are
// trusted; and the monarch binary itself once it runs (ssh and srun run
// it from the cache, which only they can change).
//
// # Stamps
//
// Hashing every copy at every use costs each host a read of every binary
// at every job (76 MB for monarch and a program; sha256sum reads 230 MB/s
// on the test cluster's machine). So once a copy is found to hold its sum
// (hashed as it arrives, or at a use that had no stamp to go by), the
// scripts write beside it, in its entry's folder, a stamp: the file as
// stat shows it (device, inode, size, mtime and ctime in nanoseconds,
// owner's uid, mode), taken before it was read, so that a change while it
// was read shows (one that arrived: after its rename into place, if it is
// still the file hashed, unwritten since). A later use takes the copy
// as holding its sum, unread, when the cache folder, the entry's folder
// and the copy keep the rule as before, the stamp keeps it too (a
// regular file of the user's or root's that no one else may write), and
// it says the copy as stat shows it now. The agent (OpenProgram) does the
// same with fstat of the program it opened.
//
// Why that is enough: no one but the user and root can write in the
// entry's folder or the cache folder, nor rename one of the folders above
// (a sticky folder of root's lets others add to it, not move what is
// ours), so no one else can write, replace or rename the copy, nor write
// its stamp. And any change to the
// copy shows in what the stamp records: a write changes its mtime and
// ctime; a chmod, a chown, a link, a touch (even one that puts the mtime
// back) change its ctime, which no call can set; a file put in its place
// is another inode. Anything else (no stamp, one that breaks the rule,
// says anything other or does not parse, a stat without times in
// nanoseconds, a filesystem with whole-second times) is no stamp: the copy
// is hashed as before, and stamped anew if good.
//
// What a stamp trusts beyond the rule: the user's own processes and root,
// as the rule does (they could write a stamp, or change a copy within the
// tick of the kernel's clock in which its stamp was taken, or set the
// clock back); and the kernel's keeping of ctime and inode numbers. A
// file at a binary's path (ModeAuto) is not stamped: it is read only when
// the cache lacks the binary, and then must be read to be copied.
//
// # On this machine
//
// Open hashes a binary to send; OpenProgram opens one to run. Prune removes the entries of a cache
// here (monarch clean) that no running process executes and that were
// not used for a while; a use touches the entry's directory.
package bincache
