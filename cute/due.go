package cute

import (
	"sync"
	"time"
)

// dueTime is when an updater goroutine (a Listener's or a dialed Conn's)
// runs the core's Update next. Other goroutines move it earlier with
// earlier, which wakes the updater through kick; the updater reads and
// resets it with get and set. Its lock is a leaf.
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

// set records when the updater runs next, later or not.
func (d *dueTime) set(t time.Time) {
	d.mu.Lock()
	d.at = t
	d.mu.Unlock()
}
