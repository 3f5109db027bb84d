package hostsconfig

import "fmt"

// A file of the other kind, a MONARCH_HOSTS file given as a job file or
// a job file as a MONARCH_HOSTS file, is reported as what it is: listing
// every key the wanted kind does not know would hide the mistake.

// isHostsFile records an error and reports true if t, read as a job
// file, is a MONARCH_HOSTS file: it sets scheduler and not program.
func (t *table) isHostsFile() bool {
	if t.has("program") || !t.has("scheduler") {
		return false
	}
	t.doc.errs.add(&ConfigError{File: t.doc.file, Msg: fmt.Sprintf(
		"this is a MONARCH_HOSTS file (it sets scheduler), not a job file: a job file names it with hosts = %q", t.doc.file)})
	return true
}

// isJobFile records an error and reports true if t, read as a
// MONARCH_HOSTS file, is a job file: it sets program and not scheduler.
func (t *table) isJobFile() bool {
	if t.has("scheduler") || !t.has("program") {
		return false
	}
	t.doc.errs.add(&ConfigError{File: t.doc.file, Msg: fmt.Sprintf(
		"this is a job file (it sets program), not a MONARCH_HOSTS file: run it with monarch run %s", t.doc.file)})
	return true
}
