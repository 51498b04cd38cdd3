// Package stacks tells tests what other goroutines are doing, from
// runtime.Stack: for instance that a reader is parked in the network poller,
// which is the moment to test that Close unblocks it, and a moment no fixed
// sleep can promise. Tests only: the library does not import it.
package stacks

import (
	"runtime"
	"strings"
)

// Blocked reports whether a goroutine whose stack names every one of fns
// (functions as runtime.Stack prints them, for example
// "transport.TestCloseUnblocksReader" or "bridge.(*muxSession).write") is
// in state, a goroutine status such as "IO wait", "chan receive" or
// "select" (matched as a prefix, since the runtime may add how long it has
// waited).
func Blocked(state string, fns ...string) bool {
	for _, g := range all() {
		header, _, _ := strings.Cut(g, "\n")
		// "goroutine 7 [IO wait, 2 minutes]:"
		_, status, ok := strings.Cut(header, " [")
		if ok && strings.HasPrefix(status, state) && containsAll(g, fns) {
			return true
		}
	}
	return false
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// Count returns how many goroutines have a stack that names every one of
// fns, in any state.
func Count(fns ...string) int {
	n := 0
	for _, g := range all() {
		if containsAll(g, fns) {
			n++
		}
	}
	return n
}

// TimerCallback is how a goroutine running a time.AfterFunc callback shows
// in its stack. Such a goroutine lives for one call: a test that counts
// goroutines waits until none is running (Settled).
const TimerCallback = "created by time.goFunc"

// Settled returns the number of goroutines, from one snapshot of them all,
// and whether none of them is transient: settled is false if any
// goroutine's stack names one of transient (TimerCallback, for example).
// A test that measures a cost in goroutines polls until settled, so that
// callbacks that happen to be running are not counted as the cost.
func Settled(transient ...string) (n int, settled bool) {
	gs := all()
	for _, g := range gs {
		if containsAny(g, transient) {
			return len(gs), false
		}
	}
	return len(gs), true
}

// Lasting returns the number of goroutines, from one snapshot of them
// all, whose stacks name none of transient (TimerCallback, for example):
// the goroutines that make up a cost, without the callbacks running at that
// moment. Unlike polling Settled for a moment with none running, it
// needs no such moment, which a starved machine with thousands of timers
// firing may never give.
func Lasting(transient ...string) int {
	n := 0
	for _, g := range all() {
		if !containsAny(g, transient) {
			n++
		}
	}
	return n
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// all returns the stack of every goroutine, as runtime.Stack prints it.
func all() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return strings.Split(string(buf), "\n\n")
}
