package actorrt

import (
	"time"

	"github.com/monarch-go/monarch/internal/jobstate"
	"github.com/monarch-go/monarch/internal/wire"
)

// A failure's tail and the job record's keep as many lines: this does
// not compile if the two bounds differ.
const _ = uint(MaxTail-jobstate.MaxTail) + uint(jobstate.MaxTail-MaxTail)

// WithGrace's doc says an hour, the most a host agent accepts: this does
// not compile if the two differ.
const _ = uint(wire.MaxStopGrace-time.Hour) + uint(time.Hour-wire.MaxStopGrace)
