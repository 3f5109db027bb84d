package actorrt

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// runWorker serves this process as a proc of a job until told to exit or
// until its bus connection is gone. It returns the exit status.
func runWorker(o options) int {
	rt, err := startWorker(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "monarch proc %s: %v\n", os.Getenv(envProc), err)
		return 1
	}
	// The client owns Ctrl-C; a proc leaves when told to (SIGTERM from its
	// agent), or with its bus.
	signal.Ignore(syscall.SIGINT)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		<-term
		rt.exitCode.Store(0)
		rt.cancel()
	}()
	<-rt.dispatchEnd
	code := int(rt.exitCode.Load())
	if code != 0 {
		fmt.Fprintf(os.Stderr, "monarch proc %s: bus connection lost, exiting\n", rt.procID)
	}
	rt.shutdown()
	return code
}

func startWorker(o options) (*runtimeT, error) {
	hostname, _ := os.Hostname()
	rt := &runtimeT{
		job:      os.Getenv(envJob),
		procID:   os.Getenv(envProc),
		busURL:   os.Getenv(envBusURL),
		token:    os.Getenv(envBusToken),
		hostname: hostname,
		opts:     o,
	}
	rt.hostLabel = hostLabel(hostname)
	// The secret stays in the runtime; user code and its children do not
	// inherit it.
	os.Unsetenv(envBusToken)
	rt.exitCode.Store(1) // unless SIGTERM asks it to stop
	parent := os.Getenv(envParent)
	port, err1 := strconv.ParseUint(os.Getenv(envReadyPort), 10, 64)
	rank, err2 := strconv.Atoi(os.Getenv(envReadyRank))
	if rt.job == "" || rt.busURL == "" || parent == "" || err1 != nil || err2 != nil {
		return nil, fmt.Errorf("incomplete bootstrap environment (%s, %s, %s, %s, %s)", envJob, envBusURL, envParent, envReadyPort, envReadyRank)
	}
	if err := rt.openSystemLog("proc-" + rt.procID); err != nil {
		return nil, err
	}
	conn, err := bus.Connect(rt.busURL, tlsOptions(bus.ConnOptions{Name: "proc " + rt.procID, Token: rt.token, MaxMessage: o.maxMessage, OnError: rt.busFault}))
	if err != nil {
		return nil, err
	}
	rt.conn = conn
	if err := rt.start(); err != nil {
		conn.Close()
		return nil, err
	}
	ready := wire.ProcReady{PID: os.Getpid(), Host: hostname}
	// Sent after the inbox SUB on the same connection: once the spawner has
	// it, the server routes messages for this proc.
	to := portRef{proc: parent, id: port, rank: rank}
	if err := rt.sendToPort(to, 0, func(e *msgpack.Encoder) error { return e.Encode(&ready) }); err != nil {
		rt.shutdown()
		return nil, err
	}
	// For the client's counts (see jobrecord.go) and the launcher's
	// progress.
	rt.publish(bus.JobSubject(rt.job, bus.SubjectUp), []byte(rt.procID+" "+rt.hostLabel))
	return rt, nil
}
