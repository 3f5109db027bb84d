// Package hostsconfig reads the two TOML files of a monarch job: the
// MONARCH_HOSTS file, which says where the hosts of a job come from
// (scheduler = "slurm", "ssh" or "local"), and the job file that
// `monarch run job.toml` reads (the program, its arguments and
// environment, its procs per host, logging, its hosts, and for a sweep
// its [array]: the indices, each task's own env and args, and fail_fast). It decodes
// them strictly, applies the defaults, checks every value, and says in
// words what a launcher would do with them (Describe).
//
// The package imports nothing else of monarch but two leaf packages,
// internal/didyoumean and internal/arrayspec (the [array] spec), so the
// launcher, the SDK and the command line can all use it.
//
// # Usage
//
//	job, err := hostsconfig.LoadJob("job.toml")
//	if err != nil {
//		return err // job.toml:4: log.aggregate_window: bad duration "3 sec": ...
//	}
//	fmt.Println(job.Describe())
//
// LoadHosts reads a MONARCH_HOSTS file alone, and Load reads either kind,
// telling them apart by content. The schemas, with every key explained,
// are the examples in the repository's testdata/: hosts-slurm.toml,
// hosts-ssh.toml, hosts-local.toml and job.toml.
//
// # Paths
//
// Relative paths in a file (a job's program, dir and hosts; a hosts
// file's identity_file, config_file and TLS files) start at the
// directory of the file that holds them, not at the working directory,
// so a job runs the same from anywhere; "~/" is the user's home. The
// loaded values hold absolute paths. The program, dir and local files
// are checked to exist when the file is loaded; the monarch binary on
// remote hosts is only checked to be absolute.
//
// # Errors
//
// Configuration mistakes are common and users fix them from the message
// alone, so every error is a *ConfigError naming the file, the line and
// the dotted key, like a compiler's:
//
//	hosts.toml:7: slurm.nodez: unknown key (did you mean "nodes"?)
//	hosts.toml:2: scheduler: want "slurm", "ssh" or "local", got "pbs"
//	hosts.toml:9: ssh.port: want an integer, got string "22"
//	job.toml: program: required key missing
//
// Unknown keys, wrong types, values out of range and missing required
// keys are all errors; nothing is silently ignored. A file with several
// problems gives them all, joined in file order. TOML syntax errors keep
// the parser's line.
//
// # Limits
//
// A configuration file is small, so a file that is not one is refused
// before it can cost much memory or time: a file over MaxFileSize (1 MiB)
// is refused without being read whole, and the rest is scanned for more
// than 10000 lines, nesting more than 10 levels deep (tables, dotted key
// parts, arrays and inline tables each add one: hosts.ssh.hosts[0] is
// 4), more than 2000 keys (each part of a dotted key or table header
// counts), more than 5000 values (each array element counts), and keys
// or unquoted values (numbers, dates) longer than 128 bytes. The error
// names the limit and, but for the size, the line:
//
//	job.toml:12: nested more than 10 levels deep (tables, dotted keys, arrays and inline tables), the limit for a configuration file
//	hosts.toml: larger than 1 MiB, the limit for a configuration file
//
// # Concurrency
//
// The functions keep no state: they may be called from any goroutine.
// A loaded Hosts or Job is a plain value, owned by the caller.
package hostsconfig
