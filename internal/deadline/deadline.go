// Package deadline implements a settable deadline whose expiry can be waited
// for in a select, as net.Conn deadlines need.
package deadline

import (
	"sync"
	"time"
)

// Deadline is a point in time after which Wait's channel is closed. The zero
// value has no deadline. It is safe for concurrent use.
type Deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	cancel chan struct{} // closed when the deadline passes
}

// Set sets the deadline; the zero time clears it. A time in the past makes
// the deadline expired at once.
func (d *Deadline) Set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel // the timer fired: wait for its close to be seen
	}
	d.timer = nil
	closed := d.cancel != nil && isClosed(d.cancel)
	if t.IsZero() {
		if closed {
			d.cancel = make(chan struct{})
		}
		return
	}
	dur := time.Until(t)
	if dur <= 0 {
		if d.cancel == nil {
			d.cancel = make(chan struct{})
		}
		if !isClosed(d.cancel) {
			close(d.cancel)
		}
		return
	}
	if d.cancel == nil || closed {
		d.cancel = make(chan struct{})
	}
	c := d.cancel
	d.timer = time.AfterFunc(dur, func() { close(c) })
}

// Wait returns a channel that is closed when the deadline passes. Take it
// before blocking; a later Set may replace it.
func (d *Deadline) Wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cancel == nil {
		d.cancel = make(chan struct{})
	}
	return d.cancel
}

// Expired reports whether the deadline has passed.
func (d *Deadline) Expired() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cancel != nil && isClosed(d.cancel)
}

// Stop releases the timer, if one is pending, without changing whether the
// deadline has passed. Call it when the owner closes.
// A Set after Stop works as usual (a SetDeadline racing a Close calls Set
// after Stop).
func (d *Deadline) Stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		if !d.timer.Stop() {
			<-d.cancel // the timer fired: wait for its close to be seen
		}
		// Forget the timer, or Set would take its failed Stop for a firing
		// and wait for a close that never comes.
		d.timer = nil
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
