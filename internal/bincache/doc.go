// Package bincache is the cache of binaries a launcher sends to its
// hosts (the job's program, the monarch binary), kept on each host under
// their content's sha256:
//
//	<dir>/<sha256>/<name>     the binary, mode 0500, in a 0700 directory
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
//     and file) and read and hashed each time it is used: one that fails
//     is refused and removed. One that arrives is hashed before it is
//     renamed into place (atomically, in its own folder); one that fails
//     is removed and never run.
//   - A file at a binary's own path on a host (ModeAuto) is not run from
//     there: if it keeps the rule and its size is the binary's, it is
//     copied into the cache, and the copy is hashed; what the hosts run
//     is that copy. One that breaks the rule is not read ("untrusted"),
//     and the binary is sent. Nothing on a script's argv (sums, sizes,
//     paths) is taken on trust, so that ps shows it matters not.
//   - Where the program runs, the host agent opens it once (OpenProgram),
//     checks the rule again on the open file and its folders, hashes the
//     descriptor against the sum the launcher sent, and starts every proc
//     from that descriptor (ExecPath), never again from the path: what
//     runs is what was hashed.
//
// What the rule leaves open: the user's own processes and root, who are
// trusted; and the monarch binary itself once it runs (ssh and srun run
// it from the cache, which only they can change).
//
// # On this machine
//
// Open hashes a binary to send; OpenProgram opens one to run. Prune removes the entries of a cache
// here (monarch clean) that no running process executes and that were
// not used for a while; a use touches the entry's directory.
package bincache
