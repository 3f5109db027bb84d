package jobview

import (
	"context"

	"github.com/monarch-go/monarch/internal/wire"
)

// Job is what the view needs of the running job: the runtime's client
// (actorrt) implements it.
type Job interface {
	// Live is what the runtime knows now, beside the model (see Live);
	// Live.At is now.
	Live() Live
	// Figures, Stacks and Profile ask proc's inspector, waiting at most
	// until ctx ends; proc "" is the client's own process, which answers
	// at once.
	Figures(ctx context.Context, proc string) (Figures, error)
	Stacks(ctx context.Context, proc string) (Stacks, error)
	Profile(ctx context.Context, proc string, args ProfileArgs) ([]byte, error)
	// ExecHosts lists the job's hosts, each with its host agent.
	ExecHosts(ctx context.Context) ([]ExecHost, error)
	// Exec asks agent to run xr, whose ID it sets, and passes what the
	// agent sends on to out until the command's end; done gives up what
	// the ask holds (call it once out has its end, or is given up).
	Exec(agent string, xr wire.ExecReq, out ExecSink) (id string, done func(), err error)
	// StopExec asks agent to stop its command id.
	StopExec(agent, id string) error
	// AgentGone is why agent is gone, or nil.
	AgentGone(agent string) error
}

// ExecHost is a host a command can run on: its name and its agent.
type ExecHost struct{ Name, Agent string }

// ExecSink takes what a host agent sends of a command (on the client's
// dispatcher: it must not block).
type ExecSink interface {
	// Output takes an event of the command; it returns false at its end.
	Output(ev wire.ExecEvent) bool
	// Broken ends the command for reason: the agent could not be heard.
	Broken(reason string)
}
