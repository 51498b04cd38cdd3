// Package race tells tests whether the race detector is on: it makes
// sync.Pool drop items at random, so allocation counts mean nothing under
// it, and the allocation tests skip (CI runs them again without -race).
package race

// Skip skips an allocation test under the race detector.
func Skip(t interface{ Skip(args ...any) }) {
	if Enabled {
		t.Skip("the race detector makes sync.Pool drop items; .ci/run runs this test without -race")
	}
}
