// Package launch gets a job running: it starts the job's bus and the
// client program, and (for multi-host jobs) the host agents, and tears all
// of it down when the client ends or the user interrupts.
//
// # Usage
//
//	code, err := launch.Local(ctx, launch.LocalConfig{Program: "./train", Args: args})
//
// # Teardown
//
// The client is started with a parent-death signal, so it cannot outlive
// the launcher; the procs it starts carry their own. SIGINT or SIGTERM to
// the launcher is passed to the client, which stops its procs and exits;
// a client that has not exited within the grace period is killed.
package launch
