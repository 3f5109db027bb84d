package hostsconfig

import "strconv"

// readExec reads a job's [exec] table: whether `monarch exec` may run
// commands on the job's hosts. It returns where the file turns it off
// ("job.toml:12"), or "" when it may (the default).
func readExec(t *table) string { return offAt(t) }

// readFeed reads a job's [feed] table: whether the job state feed counts
// messages (jobenv.FeedVar). It returns where the file turns it off, or
// "" when it counts (the default).
func readFeed(t *table) string { return offAt(t) }

// offAt reads a table whose one key is enabled (a boolean, default true):
// where the file turns it off ("job.toml:12"), or "".
func offAt(t *table) string {
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
