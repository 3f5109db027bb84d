// Package liveness is what a process knows of its job's health, as a
// pure state machine (Table): which procs are gone, and which host agent
// started each, so that an agent's end takes its procs with it; which
// agents are late (suspected) and which are lost.
//
// A silence is a suspicion, not a verdict: a starved host is late, not
// dead, and is declared lost only when a second signal confirms it (its
// link down, or a silence that outlasts lostAfter). Events go in as
// methods (ProcGone, Started, Heard, LinkChanged, Tick); the effects
// come out as types (Gone, Watch, Ask, Suspect, Cleared) that an Applier
// carries out, so an effect nobody handles does not compile. The table
// reads no clock, does no I/O and starts no goroutine; actorrt's health
// drives it under a lock. The scripts in testdata/ are its tests.
package liveness
