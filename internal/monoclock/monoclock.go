// Package monoclock keeps instants as int64 nanoseconds on the process's
// monotonic clock, for the atomics of deadlines and probe times.
//
// A time.Time from time.Now carries a monotonic reading, and Go compares
// and subtracts two such times on the monotonic clock, so that a step of
// the wall clock (NTP, an operator) moves neither. t.UnixNano() keeps only
// the wall reading: a deadline stored that way and compared with
// time.Now() later moves with every step (an hour's step ahead expires
// it at once, an hour back holds it an hour late). The instants here are
// t.Sub(origin), origin being a reading taken when the process started:
// monotonic for every t that has a monotonic reading, as the deadlines
// that callers make from time.Now have. A t without one (time.Unix,
// time.Date, a decoded time) is measured on the wall clock, as package
// net measures such deadlines.
//
// TimeNow is time.Now at one clock read instead of two, for the packet
// paths.
package monoclock

import (
	"sync/atomic"
	"time"
)

// origin is the instant every value is measured from.
var origin = time.Now()

// Of is t on the monotonic clock, or 0 for the zero Time (no deadline):
// an instant that would be 0 is given as -1, a nanosecond earlier.
func Of(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	ns := int64(t.Sub(origin))
	if ns == 0 {
		return -1
	}
	return ns
}

// Time is the time of instant ns (from Of or Now), with a monotonic
// reading: time.Until and contexts measure it on the monotonic clock.
func Time(ns int64) time.Time { return origin.Add(time.Duration(ns)) }

// Now is the current instant.
func Now() int64 { return int64(time.Since(origin)) }

// wallRefresh is how often TimeNow reads the wall clock.
const wallRefresh = time.Second

// last is the reading of time.Now that TimeNow's times are based on.
var last atomic.Pointer[time.Time]

// TimeNow is time.Now for a packet's path, at the cost of one clock read,
// the monotonic clock's, where time.Now makes two (the wall clock's and
// the monotonic one's, about 48 ns against 26 here). Its monotonic reading
// is exact, as time.Now's; its wall reading is the last full reading's
// plus the monotonic time since, the wall clock being read again once
// wallRefresh has passed, so it follows a step of the wall clock within
// wallRefresh. Durations between times from TimeNow and time.Now are
// measured on the monotonic clock, as between two from time.Now.
func TimeNow() time.Time {
	if b := last.Load(); b != nil {
		if d := time.Since(*b); d < wallRefresh {
			return b.Add(d)
		}
	}
	t := time.Now()
	last.Store(&t)
	return t
}
