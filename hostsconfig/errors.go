package hostsconfig

import (
	"errors"
	"slices"
	"strconv"
)

// ConfigError is a problem with one value of a configuration file. Every
// error the Load functions return is a *ConfigError or, when a file has
// several problems, an errors.Join of them in file order; errors.As finds
// the first either way.
//
// Users fix configuration by reading these messages, so each one names the
// file, the line and the key, the way a compiler names a source position:
//
//	hosts.toml:7: slurm.nodez: unknown key (did you mean "nodes"?)
type ConfigError struct {
	// File is the file as it was named to the Load function (or, for a
	// hosts file named by a job file, joined to the job file's directory).
	File string
	// Line is the 1-based line of the key, or 0 when the problem is the
	// absence of a key that no line holds.
	Line int
	// Key is the dotted TOML path of the value, such as "slurm.nodes" or
	// "hosts.ssh.hosts[1]"; empty when the message names what it is about.
	Key string
	// Msg says what is wrong and, where it can, what would be right.
	Msg string
}

// Error returns "file:line: key: msg", leaving out the line when it is 0
// and the key when it is empty.
func (e *ConfigError) Error() string {
	s := e.File
	if e.Line > 0 {
		s += ":" + strconv.Itoa(e.Line)
	}
	if e.Key != "" {
		s += ": " + e.Key
	}
	return s + ": " + e.Msg
}

// errorList gathers every problem found in a load, so that one run of
// `monarch config check` reports them all rather than one per run.
type errorList struct {
	errs []*ConfigError
}

func (l *errorList) add(e *ConfigError) { l.errs = append(l.errs, e) }

// err returns nil, the one error, or all of them joined: grouped by file
// in the order the files were read, each file's errors by line.
func (l *errorList) err() error {
	switch len(l.errs) {
	case 0:
		return nil
	case 1:
		return l.errs[0]
	}
	var files []string
	for _, e := range l.errs {
		if !slices.Contains(files, e.File) {
			files = append(files, e.File)
		}
	}
	sorted := slices.Clone(l.errs)
	slices.SortStableFunc(sorted, func(a, b *ConfigError) int {
		if a.File != b.File {
			return slices.Index(files, a.File) - slices.Index(files, b.File)
		}
		return a.Line - b.Line
	})
	errs := make([]error, len(sorted))
	for i, e := range sorted {
		errs[i] = e
	}
	return errors.Join(errs...)
}
