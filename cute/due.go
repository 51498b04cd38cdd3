package cute

import (
	"sync"
	"time"
)

// dueTime is when an updater goroutine (a Listener's or a dialed Conn's)
// runs the core's Update next. Other goroutines move it earlier with
// earlier, which wakes the updater through kick. The updater clears it
// with take as a run starts and merges the run's own next time with ran,
// so that a due time set during the run (a challenge that arrived while
// the updater was sending a resend) is kept, not overwritten: the updater
// sleeps until the sooner of the two. Its lock is a leaf.
type dueTime struct {
	mu   sync.Mutex
	at   time.Time     // guarded by mu; zero: not set
	kick chan struct{} // capacity 1: at moved earlier
}

func newDueTime() *dueTime { return &dueTime{kick: make(chan struct{}, 1)} }

// earlier makes the updater run by next, waking it only if that is sooner
// than it planned (zero: no change).
func (d *dueTime) earlier(next time.Time) {
	if next.IsZero() {
		return
	}
	d.mu.Lock()
	sooner := d.at.IsZero() || next.Before(d.at)
	if sooner {
		d.at = next
	}
	d.mu.Unlock()
	if sooner {
		select {
		case d.kick <- struct{}{}:
		default:
		}
	}
}

// get returns when the updater runs next (zero: not set).
func (d *dueTime) get() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at
}

// take clears the due time as the updater starts a run: any due time set
// from now on is for after the run's Update.
func (d *dueTime) take() {
	d.mu.Lock()
	d.at = time.Time{}
	d.mu.Unlock()
}

// ran records next, the time the run's Update asked for (zero: none), and
// returns when the updater runs next: the sooner of next and any due time
// set since take (zero: neither).
func (d *dueTime) ran(next time.Time) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !next.IsZero() && (d.at.IsZero() || next.Before(d.at)) {
		d.at = next
	}
	return d.at
}
