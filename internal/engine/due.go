package engine

// The deadline mechanism of the engine: when a binding runs its core's
// Update ("time is t"). A core's every call returns its next deadline; the
// binding hands it to the socket's Due (a dialed Conn: a timer, whose
// callback runs Update) or Ticker (a Listener: a goroutine that sleeps
// until Update is due). Both only ever move the wake-up earlier on a
// deadline reported from outside Update, and take the earlier of the two
// when one arrives while Update runs, so that no deadline is lost.

import (
	"sync"
	"time"

	"github.com/gonetcode/netcode/internal/timerwheel"
)

// Due runs a dialed Conn's Update (f) when the core says it is due: a
// timer (time.AfterFunc, or a timerwheel.Scheduler's, a relay's wheel)
// whose callback runs, on a goroutine of its own, only then. Schedule
// arms it no later than a deadline; Postpone moves it later once a Write
// put the next keep-alive off, so that a Conn written to at 10 Hz or more
// never runs it. Its lock is a leaf, never held across f.
type Due struct {
	sched   timerwheel.Scheduler // nil: a runtime timer
	stop    <-chan struct{}      // closed when the Conn is over: f is not called
	f       func()
	mu      leafMutex
	timer   timerwheel.Timer // runs fire; nil until first armed
	at      time.Time        // when timer fires; zero if it is not armed
	stopped bool             // set by Stop: arm no more
	fires   sync.WaitGroup   // fire calls scheduled or running
}

// Init readies d to call f on sched (nil: a runtime timer) until stop is
// closed.
func (d *Due) Init(sched timerwheel.Scheduler, stop <-chan struct{}, f func()) {
	d.sched, d.stop, d.f = sched, stop, f
}

// fire is the timer's callback.
func (d *Due) fire() {
	defer d.fires.Done()
	d.mu.Lock()
	if !d.at.After(time.Now()) {
		d.at = time.Time{} // this is that deadline's call
	}
	stopped := d.stopped
	d.mu.Unlock()
	select {
	case <-d.stop:
		return // the Conn is over: nothing is due any more
	default:
	}
	if !stopped {
		checkBinding(0)
		d.f()
	}
}

// Settle is Schedule for a deadline the read turn reports at now, after a
// batch: f runs at once, on the caller's goroutine, if next is due (the
// answer to a challenge, a denial to act on: no need to wait for the
// timer); else the timer makes sure it runs at next.
func (d *Due) Settle(now, next time.Time) {
	switch {
	case next.IsZero():
	case !now.Before(next):
		d.f()
	default:
		d.Schedule(next)
	}
}

// Schedule makes sure f runs at next (the zero Time: never). A timer
// armed for no later than next is left alone: when it fires, f reports
// the real next deadline.
func (d *Due) Schedule(next time.Time) {
	if next.IsZero() {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped || (!d.at.IsZero() && !next.Before(d.at)) {
		return
	}
	d.at = next
	wait := time.Until(next)
	if d.timer == nil {
		d.fires.Add(1)
		d.timer = timerwheel.AfterFunc(d.sched, wait, d.fire)
		return
	}
	if !d.timer.Reset(wait) {
		d.fires.Add(1) // a new call, not a moved one
	}
}

// PostponeSlack is how much later than the armed timer a Write's next
// deadline must be for Postpone to move the timer: a Conn written to
// without pause moves it a few times per keep-alive period rather than at
// every Write, and once Writes stop, the timer fires at most this early,
// for one Update that finds nothing due and sets it again.
const PostponeSlack = 10 * time.Millisecond

// Postpone moves the armed timer later, to next, the core's next deadline
// after a payload went out: the payload puts the next keep-alive off, and
// a timer left where it was would fire for nothing, a goroutine and an
// Update each time. A timer not armed is left to the callback running,
// which sets it again. next must never be later than the core's real next
// deadline: in a connected Conn, its deadlines (the keep-alive, the
// timeout) only move later.
func (d *Due) Postpone(next time.Time) {
	if next.IsZero() {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped || d.timer == nil || d.at.IsZero() || next.Sub(d.at) <= PostponeSlack {
		return
	}
	d.at = next
	if !d.timer.Reset(time.Until(next)) {
		d.fires.Add(1) // a new call: the old one has run or is running
	}
}

// Stop stops the timer and waits for a callback running to return. It
// must not be called from f.
func (d *Due) Stop() {
	d.mu.Lock()
	d.stopped = true
	if d.timer != nil && d.timer.Stop() {
		d.fires.Done() // the call it cancelled
	}
	d.mu.Unlock()
	d.fires.Wait()
}

// Ticker runs a Listener's Update when the core says it is due, on a
// goroutine of the binding's (Run): it sleeps until the deadline Update
// returned, or an earlier one given to Earlier from another goroutine (a
// new client's first keep-alive, a handshake's resend). A deadline given
// while Update runs is kept if it is earlier than Update's answer. Its
// lock is a leaf, never held across Update.
type Ticker struct {
	mu   leafMutex
	next time.Time     // the earliest deadline given since Update last ran; zero: none
	kick chan struct{} // capacity 1: next moved earlier
}

// NewTicker returns a Ticker whose first Update runs at once.
func NewTicker() *Ticker {
	return &Ticker{next: time.Now(), kick: make(chan struct{}, 1)}
}

// Earlier makes Update run by t (zero: no change), waking the ticker's
// goroutine only if that is sooner than it planned.
func (k *Ticker) Earlier(t time.Time) {
	if t.IsZero() {
		return
	}
	k.mu.Lock()
	sooner := k.next.IsZero() || t.Before(k.next)
	if sooner {
		k.next = t
	}
	k.mu.Unlock()
	if sooner {
		select {
		case k.kick <- struct{}{}:
		default:
		}
	}
}

// Run calls update whenever it is due, until stop is closed; update is
// given the time and returns its next deadline (zero: none; the goroutine
// then sleeps idle at most).
func (k *Ticker) Run(stop <-chan struct{}, idle time.Duration, update func(now time.Time) time.Time) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		case <-k.kick:
		}
		now := time.Now()
		k.mu.Lock()
		due := k.next // never zero here: only this loop clears it, and sets it again
		if due.After(now) {
			k.mu.Unlock()
			t.Reset(due.Sub(now)) // a kick for a deadline still ahead
			continue
		}
		k.next = time.Time{} // this call runs it; Earlier sets it again meanwhile
		k.mu.Unlock()
		checkBinding(0)
		next := update(now)
		if next.IsZero() {
			next = now.Add(idle)
		}
		k.mu.Lock()
		if k.next.IsZero() || next.Before(k.next) {
			k.next = next
		}
		next = k.next
		k.mu.Unlock()
		// next is now plus a monotonic interval (the core measures on
		// the monotonic clock): a step of the wall clock does not move it.
		t.Reset(max(next.Sub(now), 0))
	}
}
