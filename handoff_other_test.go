//go:build !unix

package netcode_test

// contextSwitches: the system does not tell them (getrusage is Unix's).
func contextSwitches() (switches, cpuNanos uint64, ok bool) { return 0, 0, false }
