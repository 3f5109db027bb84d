//go:build race

package actorrt_test

// raceOn: the race detector is on; it changes what allocates.
const raceOn = true
