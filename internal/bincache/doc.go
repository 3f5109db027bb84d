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
// sh with sha256sum, cat, mv and mkdir: scripts this package writes
// (CheckArgv, ReceiveArgv, SettleArgv) and a launcher runs over ssh or as
// an srun step. Each answers with lines Parse reads:
//
//	monarch-ship HOST WORD INDEX [REST]
//
// Every cached binary is checked by its sha256 where it is used: a
// cached copy is read and hashed before it is trusted (one that fails is
// refused and removed), and one that arrives is hashed before it is
// renamed into place (atomically, in its own directory); one that fails
// is removed and never run. A file at the binary's own path on a host
// (ModeAuto: run from there, nothing sent) is taken for it when it has
// the same size and modification time, as rsync's quick check does, else
// when its sha256 is the same.
//
// # On this machine
//
// Open hashes a binary to send. Prune removes the entries of a cache
// here (monarch clean) that no running process executes and that were
// not used for a while; a use touches the entry's directory.
package bincache
