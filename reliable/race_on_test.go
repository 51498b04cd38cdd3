//go:build race

package reliable

// raceEnabled: the race detector slows everything about tenfold, so the
// largest transfers run only in part under it.
const raceEnabled = true
