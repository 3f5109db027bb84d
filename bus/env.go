package bus

// The environment by which a process finds its job's bus. A launcher that
// runs the bus (monarch local, monarch run) sets them for the client; the
// runtime sets them for every proc it starts. The token is removed from
// the environment as soon as it is read, so user code and its children do
// not inherit the secret.
const (
	EnvURL   = "MONARCH_BUS_URL"
	EnvToken = "MONARCH_BUS_TOKEN"
	EnvJob   = "MONARCH_JOB"
	// With TLS: the CA file and the server name to verify (see ConnOptions).
	EnvTLSCA   = "MONARCH_BUS_TLS_CA"
	EnvTLSName = "MONARCH_BUS_TLS_NAME"
)

// JobSubject names a subject of a job: mon.<job>.<parts...>. The runtime
// and the launchers agree on these names; the bus gives them no meaning.
func JobSubject(job string, parts ...string) string {
	s := "mon." + job
	for _, p := range parts {
		s += "." + p
	}
	return s
}

// Subjects a launcher watches for its progress display: every host agent
// heartbeats on JobSubject(job, "hb", agent), and every new proc announces
// itself once on JobSubject(job, "up").
const (
	SubjectHeartbeat = "hb"
	SubjectUp        = "up"
	// SubjectAgentGone: a launcher saw a host agent's process end; the
	// last token is the agent, the payload says how.
	SubjectAgentGone = "agentgone"
	// SubjectCounts: the client tells its launcher how many hosts and
	// procs are up, as they change, for the job's record.
	SubjectCounts = "counts"
)
