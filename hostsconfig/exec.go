package hostsconfig

import "strconv"

// readExec reads a job's [exec] table: whether `monarch exec` may run
// commands on the job's hosts. It returns where the file turns it off
// ("job.toml:12"), or "" when it may (the default).
func readExec(t *table) string {
	t.unknown("enabled")
	on := true
	if !t.boolean("enabled", &on) || on {
		return ""
	}
	return t.where("enabled")
}

// where is where the file writes key k of t: "job.toml:12".
func (t *table) where(k string) string {
	where := t.doc.file
	if line := t.doc.line(t.path(k), ""); line > 0 {
		where += ":" + strconv.Itoa(line)
	}
	return where
}
