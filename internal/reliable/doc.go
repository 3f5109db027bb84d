// Package reliable makes the job's messages survive a link that drops and
// comes back: none lost, duplicated or reordered, from one sender to each
// receiver, whatever mix of subjects carries them. It is the bookkeeping
// only: plain state machines (Outbox at each sender, Inbox at each
// receiver) that take what happened and say what to send or deliver. No
// I/O, no clock (time comes in), no goroutines; not safe for concurrent
// use (the caller holds a lock). Their decisions are tested by the
// scripts in testdata/scripts (TestScripts).
//
// # The scheme
//
// Every frame a sender S publishes on a subject Y carries S's sequence
// numbers on Y (1, 2, 3, ... per sender and subject; a frame may hold a
// run of messages, numbered n, n+1, ...) and fences: for each other
// subject X that S published on since its last frame on Y, and that
// shares a receiver with Y, the last number S used on X. Subjects are of
// two kinds: a proc's own subject (one receiver) and a group's (a mesh:
// every proc hosting members); two proc subjects never share a receiver,
// a proc and a group share one if the proc is in the group, and two
// groups are taken to share one.
//
// A receiver R delivers a frame from S on Y when it has delivered every
// earlier message of S on Y (the sequence has no gap) and, for every fence
// on a subject R itself receives, every message of S on that subject up to
// the fence. Otherwise it holds the frame, and everything from S after
// it, and asks S (a NAK) for what is missing; S resends from its history.
// A frame whose numbers R has passed is a repeat: dropped (one that
// overlaps what came delivers the rest, Msg.Skip).
//
// Why that is enough: take messages m1 before m2 from S, both for R, on
// subjects X and Y. If X = Y the sequence orders them. If not, both
// subjects reach R, so they share a receiver, and the first frame S sent
// on Y after m1 (m2's or one before it on Y) carries a fence on X at least
// m1's number: R delivers it, and so m2, only after m1.
//
// A lost frame is found by the next frame on its subject (a gap), by a
// fence on a later frame on another subject, or, if S sends nothing more,
// by the tail markers S sends on a subject that went quiet (TailDelays,
// and at once when its link comes back: Outbox.LinkUp). NAKs are repeated
// while a gap stays open, with backoff (NakRetry), and at once when the
// receiver's link comes back (Inbox.LinkUp). So once the link is back,
// every loss is found and repaired, as long as S still holds the message:
// its history keeps what it sent for Limits.Retain, at most
// Limits.MaxBytes, until every receiver acknowledged it (AckEvery,
// AckInterval); if it does not, it says so, and the messages are lost.
//
// # What is said lost
//
// A message is lost only on its sender's word: when R still misses it
// (neither delivered nor held), R asked S for it in a NAK, and S, a
// member of the job, answered "no longer held" (Outbox.Nak's
// Answer.Missing, Inbox.Missing). S never answers so for numbers R
// acknowledged, whatever order the acknowledgement and the NAK reach it
// in; R ignores such an answer for numbers it has or never asked for,
// and drops (and says so) one from a sender not known to be a member.
// Every loss is in Effects.Lost, for the caller to report: never silent.
// Nothing else makes messages lost: a gap S does not answer for GiveUp,
// or what R held of S past its bounds, is dropped, not lost, and asked
// for again (next paragraphs).
//
// # Who is a member
//
// The inbox asks its caller, when it first hears from a sender, what it
// knows of it (Standing: Member, Stranger or Unknown). Once a message of
// an Unknown sender is delivered, it asks the caller to find out
// (Effects.Ask); the answer comes back through Judged. Until then the
// sender's word does not count, and it is not forgotten for another (its
// messages could be delivered twice). The caller decides how it knows
// (internal/delivery's Config.Standing; the runtime's in actorrt).
//
// # Bounds
//
// Everything a peer can make an Inbox keep is bounded (InLimits): the
// bytes held per sender and in all, the senders tracked (65,536; a
// sender's state is a few hundred bytes), and among them those not known
// to be members (Strangers, 1,024: made-up senders look like that,
// whether their messages were delivered or not). Past a bound on
// senders, the stranger heard from least recently is forgotten for the
// new one, so that no flood of made-up senders locks a new proc out;
// only while every stranger tracked is being asked about is a new sender
// refused, until the answers come (its tail markers bring it back).
// Past a bound on bytes, what is held of a stranger is dropped, and it
// is forgotten; what is held of a member is dropped and its gaps widen
// over it, to be sent again. A number more than Ahead (2^32) past the
// last delivered on its subject, in a frame, a fence or a tail marker,
// is refused, not waited for: no sender in the job gets that far ahead
// (DefaultAhead says why). A gap that gets no answer is asked for, with
// backoff, for GiveUp at most; then the NAKs stop, a stranger is
// forgotten (Effects.Dropped), and a member's gaps close with what they
// held back dropped: its next frame opens them again, and a member that
// was only slow answers then. Only subjects the receiver subscribed to
// count (frames, tail markers, fences). An Outbox answers NAKs and takes
// acknowledgements only from receivers of the subject, at most
// MaxNakSpan numbers per NAK.
package reliable
