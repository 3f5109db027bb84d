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
	where := t.doc.file
	if line := t.doc.line(t.path("enabled"), ""); line > 0 {
		where += ":" + strconv.Itoa(line)
	}
	return where
}
