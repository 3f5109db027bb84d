package ibverbs

import (
	"context"
	"errors"
	"fmt"
)

// Op is one transfer of a batch: Local's bytes to (Write) or from
// Handle's buffer at byte Off.
type Op struct {
	Handle Handle
	Off    int
	Local  []byte
	Write  bool
}

// maxBatchInFlight bounds the transfers of a batch under way at once.
const maxBatchInFlight = 16

// Do submits ops at once and waits for all of them: they run
// concurrently (at most 16 at a time), in no order, as a batch of RDMA
// work requests would. Ops on overlapping bytes race, as there. The error
// names each op that failed, by its index.
func Do(ctx context.Context, ops ...Op) error {
	errs := make([]error, len(ops))
	sem := make(chan struct{}, maxBatchInFlight)
	done := make(chan struct{}, len(ops))
	for i, op := range ops {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; done <- struct{}{} }()
			if err := op.Handle.transfer(ctx, op.Off, op.Local, op.Write); err != nil {
				errs[i] = fmt.Errorf("op %d: %w", i, err)
			}
		}()
	}
	for range ops {
		<-done
	}
	return errors.Join(errs...)
}
