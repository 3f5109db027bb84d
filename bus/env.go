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
)
