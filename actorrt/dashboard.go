package actorrt

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/dashboard"
	"github.com/monarch-go/monarch/internal/jobctl"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/metrics"
	"github.com/monarch-go/monarch/logagg"
)

// The job's dashboard (internal/dashboard): the client serves it from
// its start to its end, beside the control socket, on the address the
// job file's [dashboard] or $MONARCH_DASHBOARD gives (default a free
// loopback port), behind a token it makes; it prints the URL once, on the
// terminal's stderr (not the program's: the token stays out of the
// job's log), and answers jobctl.OpDashboard with it; /metrics beside
// the page serves the same state to Prometheus. The page reads the
// job state feed (feed.go), the stacks of the control socket
// (inspect.go) and the job's log as `monarch logs` does. A configured
// address that cannot be had fails the job's start; the default one only
// leaves the job without a dashboard (the client's log says why).

// dashboardJob is the job as the dashboard and its metrics endpoint
// (internal/metrics) see it.
type dashboardJob struct{ c *client }

var (
	_ dashboard.Job  = dashboardJob{}
	_ metrics.Source = dashboardJob{}
)

func (d dashboardJob) State(ctx context.Context) (*jobctl.JobState, error) {
	return d.c.state(ctx, jobctl.DefaultStateTimeout), nil
}

func (d dashboardJob) Stacks(ctx context.Context, req jobctl.StacksRequest) (*jobctl.StacksAnswer, error) {
	return d.c.stacks(ctx, req)
}

func (d dashboardJob) Logs(ctx context.Context, f logagg.Filter, emit func(logagg.Line) error) error {
	return logagg.Read(ctx, hostsconfig.StateDir(), d.c.job, f, false, emit)
}

// serveDashboard starts the job's dashboard as env says.
func (c *client) serveDashboard(env jobenv.Env) error {
	addr, where := env.Dashboard, env.DashboardAt
	if addr != "" && where == "" {
		where = "$" + jobenv.DashboardVar
	}
	if addr == hostsconfig.DashboardOff {
		c.dashOff = "it is turned off by " + where
		return nil
	}
	tok, err := dashboard.NewToken()
	if err == nil {
		c.dashboard, err = dashboard.Start(dashboard.Options{Addr: addr, Token: tok, Job: dashboardJob{c}, Metrics: metrics.Handler(dashboardJob{c})})
	}
	switch {
	case err != nil && where != "":
		return fmt.Errorf("actorrt: the job's dashboard cannot listen on %s (set by %s): %w", addr, where, err)
	case err != nil:
		c.dashOff = "it could not start: " + err.Error()
		c.log.Warn().Err(err).Msg("the job runs without its dashboard")
		return nil
	}
	fmt.Fprintf(c.logs.stderr, "monarch: dashboard %s\n", c.dashboard.URL())
	return nil
}

// ctlDashboard answers an OpDashboard request.
func (c *client) ctlDashboard(context.Context, json.RawMessage) (any, error) {
	if c.dashboard == nil {
		return &jobctl.DashboardAnswer{Off: c.dashOff}, nil
	}
	return &jobctl.DashboardAnswer{URL: c.dashboard.URL()}, nil
}
