package reliable

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestScripts runs the scripts in testdata/scripts: one sender's Outbox
// ("s") and receivers' Inboxes, driven event by event, printing the
// effects each event gives. The script carries every message by hand, so
// that it can lose, repeat, reorder and forge them. Times are offsets from
// the start of the script (at=; an event without one happens when the one
// before did). Commands:
//
//	outbox retain=1h bytes=1000        the sender (every script starts with one)
//	subject key=proc.r proc=r          a subject the sender sends on
//	subject key=mesh.m group=r,q
//	inbox r keys=proc.r,mesh.m [senders=N strangers=N held=N perheld=N giveup=D ahead=N]
//	      [members=s,p unknown=q]     who is in the job: without either, every
//	                                   sender is a member; with them, a sender
//	                                   named in neither is a stranger
//	send key=proc.r [n=3] [size=1]     the outbox stamps and keeps a frame: "frame proc.r/1 1..3 fences mesh.m:2"
//	recv r frame=proc.r/1              r receives that frame, as sent
//	recv r from=x key=proc.r seq=4 [n=2] [fences=mesh.m:3] [size=1]   or one made up
//	tail r from=s key=proc.r seq=5     a tail marker
//	missing r from=s key=proc.r lo=2 hi=3   the sender's answer: no longer held
//	nak from=r key=proc.r lo=1 hi=5    the outbox answers a NAK
//	ack from=r key=proc.r seq=3        the outbox takes an acknowledgement
//	tick r                             an inbox's tick (NAKs again, give-ups)
//	acks r                             the acknowledgements an inbox owes at a tick
//	otick                              the outbox's tick (tail markers due)
//	linkup r | olinkup                 the link came back
//	gone proc=r                        the outbox hears a proc ended
//	forget r from=s                    an inbox hears a sender ended
//	judge r from=q standing=member     an inbox hears what its caller found out
//	state r                            what an inbox tracks
//
// go test -run TestScripts -rewrite ./internal/reliable rewrites the
// expected output; read the diff before keeping it.
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/scripts", func(t *testing.T, path string) {
		var (
			out      *Outbox
			subjects = map[string]*Subject{}
			ins      = map[string]*Inbox{}
			frames   = map[string]Msg{}
			now      = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			epoch    = now
		)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.HasArg("at") {
				var s string
				d.ScanArgs(t, "at", &s)
				off, err := time.ParseDuration(s)
				if err != nil {
					d.Fatalf(t, "at=%s: %v", s, err)
				}
				now = epoch.Add(off)
			}
			arg := func(key string) string {
				var s string
				d.ScanArgs(t, key, &s)
				return s
			}
			num := func(key string) uint64 {
				n, err := strconv.ParseUint(arg(key), 10, 64)
				if err != nil {
					d.Fatalf(t, "%s: %v", key, err)
				}
				return n
			}
			opt := func(key string, def int) int {
				if !d.HasArg(key) {
					return def
				}
				return int(num(key))
			}
			inbox := func() *Inbox {
				if len(d.CmdArgs) == 0 || ins[d.CmdArgs[0].Key] == nil {
					d.Fatalf(t, "%s: name an inbox first", d.Cmd)
				}
				return ins[d.CmdArgs[0].Key]
			}
			if d.Cmd != "outbox" && out == nil {
				d.Fatalf(t, "start the script with: outbox retain=D bytes=N")
			}
			switch d.Cmd {
			case "outbox":
				retain, err := time.ParseDuration(arg("retain"))
				if err != nil {
					d.Fatalf(t, "retain: %v", err)
				}
				out = NewOutbox(Limits{Retain: retain, MaxBytes: int(num("bytes"))})
				return ""
			case "subject":
				s := &Subject{Key: arg("key")}
				if d.HasArg("proc") {
					s.Proc = arg("proc")
				} else {
					s.Group = map[string]bool{}
					for _, p := range strings.Split(arg("group"), ",") {
						s.Group[p] = true
					}
				}
				subjects[s.Key] = s
				return ""
			case "inbox":
				lim := DefaultInLimits
				lim.Senders = opt("senders", lim.Senders)
				lim.Strangers = opt("strangers", lim.Strangers)
				lim.Ahead = uint64(opt("ahead", int(lim.Ahead)))
				lim.Held = opt("held", lim.Held)
				lim.HeldPerSender = opt("perheld", lim.HeldPerSender)
				if d.HasArg("giveup") {
					g, err := time.ParseDuration(arg("giveup"))
					if err != nil {
						d.Fatalf(t, "giveup: %v", err)
					}
					lim.GiveUp = g
				}
				var standing func(string) Standing
				if d.HasArg("members") || d.HasArg("unknown") {
					known := map[string]Standing{}
					for _, which := range []struct {
						arg string
						st  Standing
					}{{"members", Member}, {"unknown", Unknown}} {
						if d.HasArg(which.arg) {
							for _, p := range strings.Split(arg(which.arg), ",") {
								known[p] = which.st
							}
						}
					}
					standing = func(from string) Standing {
						if st, ok := known[from]; ok {
							return st
						}
						return Stranger
					}
				}
				in := NewInbox(lim, standing)
				for _, k := range strings.Split(arg("keys"), ",") {
					in.Subscribe(k)
				}
				ins[d.CmdArgs[0].Key] = in
				return ""
			case "send":
				s := subjects[arg("key")]
				if s == nil {
					d.Fatalf(t, "no subject %s", arg("key"))
				}
				n := opt("n", 1)
				first, fences := out.Stamp(s, n, now)
				name := fmt.Sprintf("%s/%d", s.Key, first)
				payload := []byte(name + strings.Repeat(".", max(opt("size", len(name)), len(name))-len(name)))
				out.Keep(s, first, n, [][]byte{payload}, now)
				frames[name] = Msg{From: "s", Key: s.Key, Seq: first, N: n, Fences: fences, Size: 1, Payload: name}
				return fmt.Sprintf("frame %s %s fences %s\n", name, span(first, n), fenceList(fences))
			case "recv":
				in := inbox()
				var m Msg
				if d.HasArg("frame") {
					f, ok := frames[arg("frame")]
					if !ok {
						d.Fatalf(t, "no frame %s was sent", arg("frame"))
					}
					m = f
				} else {
					m = Msg{From: arg("from"), Key: arg("key"), Seq: num("seq"), N: opt("n", 1), Size: opt("size", 1)}
					m.Payload = fmt.Sprintf("%s:%s/%d", m.From, m.Key, m.Seq)
					if d.HasArg("fences") {
						for _, f := range strings.Split(arg("fences"), ",") {
							k, s, _ := strings.Cut(f, ":")
							n, _ := strconv.ParseUint(s, 10, 64)
							m.Fences = append(m.Fences, Fence{k, n})
						}
					}
				}
				return effects(in.Receive(m, now))
			case "tail":
				return effects(inbox().Tail(arg("from"), arg("key"), num("seq"), now))
			case "missing":
				return effects(inbox().Missing(arg("from"), arg("key"), num("lo"), num("hi"), now))
			case "nak":
				a := out.Nak(arg("from"), arg("key"), num("lo"), num("hi"))
				var b strings.Builder
				for _, f := range a.Frames {
					fmt.Fprintf(&b, "resend %s\n", strings.TrimRight(string(f), "."))
				}
				for _, r := range a.Missing {
					fmt.Fprintf(&b, "missing %d..%d\n", r.Lo, r.Hi)
				}
				return b.String()
			case "ack":
				out.Ack(arg("from"), arg("key"), num("seq"))
				return fmt.Sprintf("holding %d bytes\n", out.Holding())
			case "tick":
				return effects(inbox().Tick(now))
			case "acks":
				in := inbox()
				acks := append(in.DueAcks(), in.Acks(now)...)
				slices.SortFunc(acks, func(a, b Ack) int { return strings.Compare(a.To+a.Key, b.To+b.Key) })
				var b strings.Builder
				for _, a := range acks {
					fmt.Fprintf(&b, "ack %s %s %d\n", a.To, a.Key, a.Seq)
				}
				return b.String()
			case "otick":
				return tails(out.Tick(now)) + fmt.Sprintf("holding %d bytes\n", out.Holding())
			case "linkup":
				return effects(inbox().LinkUp(now))
			case "olinkup":
				return tails(out.LinkUp(now))
			case "gone":
				out.ProcGone(arg("proc"))
				out.Forget("proc." + arg("proc"))
				return fmt.Sprintf("holding %d bytes\n", out.Holding())
			case "forget":
				inbox().Forget(arg("from"))
				return ""
			case "judge":
				st := map[string]Standing{"member": Member, "stranger": Stranger, "unknown": Unknown}[arg("standing")]
				inbox().Judged(arg("from"), st)
				return ""
			case "state":
				in := inbox()
				return fmt.Sprintf("senders %d (strangers %d, %d being asked about), held %d bytes, gaps %d\n",
					in.Senders(), in.Strangers(), in.asking, in.held, len(in.gapped))
			}
			d.Fatalf(t, "unknown command %s", d.Cmd)
			return ""
		})
	})
}

func span(first uint64, n int) string {
	if n <= 1 {
		return strconv.FormatUint(first, 10)
	}
	return fmt.Sprintf("%d..%d", first, first+uint64(n)-1)
}

func fenceList(fences []Fence) string {
	if len(fences) == 0 {
		return "()"
	}
	var parts []string
	for _, f := range fences {
		parts = append(parts, fmt.Sprintf("%s:%d", f.Key, f.Seq))
	}
	return strings.Join(parts, ",")
}

// effects prints what an inbox event asked for, in a fixed order.
func effects(e Effects) string {
	var b strings.Builder
	for _, l := range e.Lost {
		fmt.Fprintf(&b, "lost %s %s %d..%d: %s\n", l.From, l.Key, l.Lo, l.Hi, l.Why)
	}
	for _, m := range e.Deliver {
		fmt.Fprintf(&b, "deliver %v %s", m.Payload, span(m.Seq+uint64(m.Skip), max(m.N, 1)-m.Skip))
		if m.Skip > 0 {
			fmt.Fprintf(&b, " (skipping %d)", m.Skip)
		}
		b.WriteString("\n")
	}
	for _, n := range e.Naks {
		fmt.Fprintf(&b, "nak %s %s %d..%d\n", n.To, n.Key, n.Lo, n.Hi)
	}
	for _, d := range e.Dropped {
		fmt.Fprintf(&b, "drop %s (%d held): %s\n", d.From, d.Held, d.Why)
	}
	for _, a := range e.Ask {
		fmt.Fprintf(&b, "ask %s\n", a)
	}
	return b.String()
}

func tails(fs []Fence) string {
	slices.SortFunc(fs, func(a, b Fence) int { return strings.Compare(a.Key, b.Key) })
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "tail %s %d\n", f.Key, f.Seq)
	}
	return b.String()
}
