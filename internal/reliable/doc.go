// Package reliable makes the job's messages survive a link that drops and
// comes back: none lost, duplicated or reordered, from one sender to each
// receiver, whatever mix of subjects carries them. It is the bookkeeping
// only: plain state machines (Outbox at each sender, Inbox at each
// receiver) that take what happened and say what to send or deliver. No
// I/O, no clock (time comes in), no goroutines; not safe for concurrent
// use (the caller holds a lock).
//
// # The scheme
//
// Every message a sender S publishes on a subject Y carries S's sequence
// number on Y (1, 2, 3, ... per sender and subject) and fences: for each
// other subject X that S published on since its last message on Y, and
// that shares a receiver with Y, the last sequence number S used on X.
// Subjects are of two kinds: a proc's own subject (one receiver) and a
// group's (a mesh: every proc hosting members); two proc subjects never
// share a receiver, a proc and a group share one if the proc is in the
// group, and two groups are taken to share one.
//
// A receiver R delivers a message from S on Y when it has delivered every
// earlier message of S on Y (the sequence has no gap) and, for every fence
// on a subject R itself receives, every message of S on that subject up to
// the fence. Otherwise it holds the message, and everything from S after
// it, and asks S (a NAK) for what is missing; S resends from its history.
// A message whose sequence number R has passed is a duplicate: dropped.
//
// Why that is enough: take messages m1 before m2 from S, both for R, on
// subjects X and Y. If X = Y the sequence orders them. If not, both
// subjects reach R, so they share a receiver, and the first message S sent
// on Y after m1 (m2 or one before it on Y) carries a fence on X at least
// m1's number: R delivers it, and so m2, only after m1.
//
// A lost message is found by the next message on its subject (a gap), by a
// fence on a later message on another subject, or, if S sends nothing
// more, by the tail markers S sends on a subject that went quiet (after
// TailDelays). NAKs are repeated while a gap stays open. So once the link
// is back, every loss is found and repaired, as long as S still holds the
// message: its history keeps what it sent for Limits.Retain, at most
// Limits.MaxBytes. What it no longer holds it says so (Missing), and the
// receiver gives up on it: that loss is the caller's to report, never
// silent.
package reliable
