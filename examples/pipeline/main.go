// Command pipeline is a supervised two-stage pipeline whose stages are
// restarted in place by their restart policies, one of them with its state
// restored from the checkpoint it writes in Cleanup.
//
//	monarch local -- bin/pipeline -batches 40
//
// The client sends batches of numbers (as text) to a mesh of parsers; each
// parser parses its batch and sends the numbers on to one summer, which
// keeps the running total. Two faults are injected:
//
//   - a poison batch makes a parser panic: its restart policy replaces it
//     in place (the same reference keeps working); the poison batch is the
//     one message lost, the batches queued behind it reach the new parser;
//   - the client tells the summer to crash halfway: its Cleanup writes the
//     total so far to a checkpoint file, and the new instance's Init reads
//     it back, so no number is counted twice or lost.
//
// At the end the client checks the summer's total against the sum of
// every batch but the poison one, and exits 1 if they differ.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// Summer keeps the running total of what the parsers send it.
type Summer struct {
	path  string // its checkpoint
	state tally
}

// tally is the summer's state, and its checkpoint.
type tally struct {
	Total int64 `json:"total"`
	Count int   `json:"count"`
}

// Init restores the checkpoint an earlier instance wrote, if any.
func (s *Summer) Init(ctx *actorrt.Context, path string) error {
	s.path = path
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &s.state); err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	fmt.Printf("summer: restored %d numbers, total %d, from %s\n", s.state.Count, s.state.Total, filepath.Base(path))
	return nil
}

// Cleanup writes the checkpoint, whatever ended the actor.
func (s *Summer) Cleanup(ctx *actorrt.Context, cause error) error {
	b, err := json.Marshal(s.state)
	if err != nil {
		return err
	}
	return os.WriteFile(s.path, b, 0o600)
}

// Add counts numbers.
func (s *Summer) Add(ctx *actorrt.Context, nums []int64) error {
	for _, n := range nums {
		s.state.Total += n
	}
	s.state.Count += len(nums)
	return nil
}

// Crash fails the summer (sent with Broadcast, nobody receives the panic).
func (s *Summer) Crash(ctx *actorrt.Context) error { panic("summer told to crash") }

// Tally is the state so far.
func (s *Summer) Tally(ctx *actorrt.Context) (tally, error) { return s.state, nil }

// Parser parses batches and sends the numbers on to the summer.
type Parser struct {
	sink *actorrt.ActorMesh[Summer]
}

func (p *Parser) Init(ctx *actorrt.Context, sink *actorrt.ActorMesh[Summer]) error {
	p.sink = sink
	return nil
}

// Parse parses a batch; a batch it cannot parse makes it panic (a bug
// the restart policy covers).
func (p *Parser) Parse(ctx *actorrt.Context, batch []string) error {
	nums := make([]int64, len(batch))
	for i, s := range batch {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			panic(fmt.Sprintf("parser %v: cannot parse %q", ctx.ActorInstance().Rank(), s))
		}
		nums[i] = n
	}
	return add.Broadcast(p.sink, nums)
}

// Flush returns once what this parser sent the summer before it has been
// counted: the summer answers after every earlier message of this sender.
func (p *Parser) Flush(ctx *actorrt.Context) error {
	_, err := tallyOf.CallOne(p.sink).Get(ctx)
	return err
}

var (
	add     = actorrt.VoidMethod1((*Summer).Add)
	tallyOf = actorrt.Method((*Summer).Tally)
	parse   = actorrt.VoidMethod1((*Parser).Parse)
	flush   = actorrt.VoidMethod((*Parser).Flush)
)

func main() {
	batches := flag.Int("batches", 40, "batches to send")
	size := flag.Int("size", 50, "numbers per batch")
	poison := flag.Int("poison", 7, "the batch that makes a parser panic (-1: none)")
	crashAt := flag.Int("crash-summer-at", 20, "the batch after which the summer is told to crash (-1: never)")
	dir := flag.String("dir", "", "where the summer's checkpoint goes (default: a new temporary directory, removed at the end)")
	flag.Parse()
	for _, err := range []error{actorrt.Register[Summer](), actorrt.Register[Parser]()} {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	actorrt.Main(func(ctx context.Context) error {
		return run(ctx, *batches, *size, *poison, *crashAt, *dir)
	})
}

func run(ctx context.Context, batches, size, poison, crashAt int, dir string) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "pipeline")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"stages", 3}})
	if err != nil {
		return err
	}
	// Stopped before the directory goes: the summer's last Cleanup writes there.
	defer procs.Stop(context.WithoutCancel(ctx))
	// Restart in place, at once, at most 5 times a minute.
	policy := actorrt.RestartPolicy{MaxRestarts: 5, Window: time.Minute, MaxBackoff: time.Second}
	summer, err := actorrt.Init1((*Summer).Init).SpawnWith(ctx, procs.Slice("stages", 0, 1), "summer",
		actorrt.SpawnOptions{Restart: &policy}, filepath.Join(dir, "summer.json"))
	if err != nil {
		return err
	}
	parsers, err := actorrt.Init1((*Parser).Init).SpawnWith(ctx, procs.Slice("stages", 1, 3), "parsers",
		actorrt.SpawnOptions{Restart: &policy}, summer)
	if err != nil {
		return err
	}

	var want int64
	n := parsers.Extent().NumRanks()
	for b := range batches {
		batch := make([]string, size)
		for i := range batch {
			v := int64(b*size + i)
			batch[i] = strconv.FormatInt(v, 10)
			if b != poison {
				want += v
			}
		}
		if b == poison {
			batch[size/2] = "not a number"
		}
		if err := parse.Broadcast(parsers.At("stages", b%n), batch); err != nil {
			return err
		}
		if b == crashAt {
			// After the numbers of the batches so far reached the summer.
			if err := flushAll(ctx, parsers); err != nil {
				return err
			}
			if err := actorrt.VoidMethod((*Summer).Crash).Broadcast(summer); err != nil {
				return err
			}
		}
	}
	if err := flushAll(ctx, parsers); err != nil {
		return err
	}
	got, err := tallyOf.CallOne(summer).Get(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("summer: %d numbers, total %d; want %d (every batch but the poison one)\n", got.Count, got.Total, want)
	if got.Total != want {
		return &actorrt.ExitError{Code: 1, Err: fmt.Errorf("the total is %d, want %d", got.Total, want)}
	}
	return nil
}

// flushAll waits until every parser's numbers so far were counted. A
// parser that failed ends the Flush call that was in its mailbox with
// ErrActorFailed: it is asked again, and the new instance answers.
func flushAll(ctx context.Context, parsers *actorrt.ActorMesh[Parser]) error {
	for range 50 {
		_, err := flush.Call(parsers).Get(ctx)
		if !errors.Is(err, actorrt.ErrActorFailed) {
			return err
		}
	}
	return errors.New("parsers: Flush failed 50 times")
}
