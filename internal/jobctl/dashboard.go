package jobctl

import (
	"encoding/json"
	"time"
)

// OpDashboard asks where the job's dashboard is: an empty request,
// answered by a DashboardAnswer.
const OpDashboard = "dashboard"

// DashboardAnswer says where the job's dashboard is, or why it has none.
type DashboardAnswer struct {
	// URL is the dashboard's address with the job's token
	// (http://127.0.0.1:PORT/PREFIX/?token=T): whoever has it may see the job.
	URL string `json:"url,omitempty"`
	// Off, when URL is empty, says why: where the dashboard was turned
	// off ("job.toml:12", "$MONARCH_DASHBOARD"), or why it could not
	// start.
	Off string `json:"off,omitempty"`
}

// DashboardBound is the bound of an OpDashboard: the answer is at hand.
func DashboardBound(json.RawMessage) time.Duration { return 5 * time.Second }
