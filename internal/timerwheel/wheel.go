// Package timerwheel runs the timers of many dialed Conns on one scheduler:
// a wheel of coarse buckets driven by a single runtime timer, instead of a
// runtime timer per Conn, each of whose firings starts a goroutine.
//
// A process that owns thousands of dialed Conns (the bridge's relay, one
// per browser) makes a Wheel and dials through a context that carries it
// (With); a Conn dialed so arms its keep-alive and timeout timer on the
// wheel (AfterFunc), and a Conn dialed without one uses time.AfterFunc as
// before. This is internal: no exported API of the module changes.
//
// A timer on the wheel fires at or after its time, never before: at the
// first tick (every Tick) that has reached it. A netcode client's timer is
// its keep-alive (100 ms after the last packet sent) and its timeouts
// (seconds); running it up to a tick late is what the C reference's
// client does when its game ticks at that rate, and it lets a payload
// sent in the meantime put the keep-alive off instead of racing it.
package timerwheel

import (
	"context"
	"sync"
	"time"
)

// Timer is the part of *time.Timer (as time.AfterFunc returns it) that a
// dialed Conn uses, with the same contract: Reset reports whether the timer
// was armed (a pending call moved rather than a new one), Stop whether it
// prevented a pending call. *time.Timer implements it.
type Timer interface {
	Reset(d time.Duration) bool
	Stop() bool
}

// Scheduler makes Timers: time.AfterFunc's contract, on a scheduler of its
// own.
type Scheduler interface {
	AfterFunc(d time.Duration, f func()) Timer
}

type ctxKey struct{}

// With returns a context whose dials arm their Conns' timers on s.
func With(ctx context.Context, s Scheduler) context.Context {
	return context.WithValue(ctx, ctxKey{}, s)
}

// From returns the Scheduler ctx carries, or nil.
func From(ctx context.Context) Scheduler {
	s, _ := ctx.Value(ctxKey{}).(Scheduler)
	return s
}

// AfterFunc calls f after d on s, or on its own runtime timer
// (time.AfterFunc) when s is nil.
func AfterFunc(s Scheduler, d time.Duration, f func()) Timer {
	if s == nil {
		return time.AfterFunc(d, f)
	}
	return s.AfterFunc(d, f)
}

// DefaultTick is a Wheel's tick when New is given 0: a C client ticking
// at 100 Hz, a tenth of the keep-alive interval.
const DefaultTick = 10 * time.Millisecond

// wheelSlots is how many buckets the wheel has (a power of two): 64 ticks
// of 10 ms span 640 ms, beyond a keep-alive interval. A timer further
// ahead waits in its slot and is passed over until its turn comes round.
const wheelSlots = 64

// Wheel is a Scheduler that keeps its timers in buckets of one tick and
// runs those due, in one goroutine at a time, from a single runtime timer
// that ticks while any timer is armed (and not otherwise). Callbacks run
// one after another: one that blocks delays the others, so they must only
// take short locks and do non-blocking I/O (a dialed Conn's keep-alive).
//
// Lock order: mu is a leaf. A callback runs without it, so it may arm,
// move or stop timers, its own included.
type Wheel struct {
	tick  int64     // ns
	start time.Time // the wheel's clock is the time since start

	mu      sync.Mutex
	slots   [wheelSlots]entry // list heads (sentinels)
	pos     int64             // the next bucket to run: due at pos*tick
	armed   int               // timers armed
	ticker  *time.Timer       // runs advance; nil until first needed
	ticking bool              // ticker is set to fire (or advance is running)
	wake    int64             // the bucket ticker is set for, while ticking
	busy    bool              // an advance is taking or running timers
	closed  bool
	due     []*entry       // taken by advance, run after it unlocks; used only there
	running sync.WaitGroup // an advance in progress

	fired uint64 // callbacks run, for tests; guarded by mu
}

// New returns a Wheel whose ticks are tick apart (0: DefaultTick).
func New(tick time.Duration) *Wheel {
	if tick <= 0 {
		tick = DefaultTick
	}
	w := &Wheel{tick: int64(tick), start: time.Now()}
	for i := range w.slots {
		s := &w.slots[i]
		s.prev, s.next = s, s
	}
	return w
}

// entry is a timer of the wheel, linked into its bucket's list while
// armed.
type entry struct {
	w          *Wheel
	f          func()
	at         int64 // the wheel's time it is due
	prev, next *entry
	armed      bool
}

var _ Scheduler = (*Wheel)(nil)

// now is the wheel's clock: monotonic ns since start.
func (w *Wheel) now() int64 { return int64(time.Since(w.start)) }

// AfterFunc implements Scheduler: f runs on the wheel at or after d from
// now (within a tick after it).
func (w *Wheel) AfterFunc(d time.Duration, f func()) Timer {
	e := &entry{w: w, f: f}
	w.mu.Lock()
	w.arm(e, d)
	w.mu.Unlock()
	return e
}

// Reset implements Timer: e runs d from now; it reports whether it was
// armed (its pending call moved) or not (a new call).
func (e *entry) Reset(d time.Duration) bool {
	w := e.w
	w.mu.Lock()
	was := e.armed
	if was {
		w.unlink(e)
	}
	w.arm(e, d)
	w.mu.Unlock()
	return was
}

// Stop implements Timer: it reports whether it prevented a pending call.
// A call already taken to run (or running) is not prevented.
func (e *entry) Stop() bool {
	w := e.w
	w.mu.Lock()
	was := e.armed
	if was {
		w.unlink(e)
	}
	w.mu.Unlock()
	return was
}

// arm links e into the bucket of its time. mu is held; e is unlinked.
func (w *Wheel) arm(e *entry, d time.Duration) {
	now := w.now()
	if w.armed == 0 {
		// Nothing armed: no bucket behind now needs passing over.
		w.pos = max(w.pos, now/w.tick)
	}
	e.at = now + max(int64(d), 0)
	b := max((e.at+w.tick-1)/w.tick, w.pos) // the first tick at or after at
	head := &w.slots[b&(wheelSlots-1)]
	e.prev, e.next = head.prev, head
	head.prev.next = e
	head.prev = e
	e.armed = true
	w.armed++
	if w.closed || (w.ticking && (w.busy || b >= w.wake)) {
		return // the ticker comes in time (or an advance resets it)
	}
	w.ticking, w.wake = true, b
	wait := time.Duration(max(b*w.tick-now, 0))
	if w.ticker == nil {
		w.ticker = time.AfterFunc(wait, w.advance)
	} else {
		// If the ticker's call has started already, this is a second
		// one: advance lets only one at a time take timers.
		w.ticker.Reset(wait)
	}
}

// unlink takes e out of its bucket. mu is held; e is armed.
func (w *Wheel) unlink(e *entry) {
	e.prev.next = e.next
	e.next.prev = e.prev
	e.prev, e.next = nil, nil
	e.armed = false
	w.armed--
}

// advance is the ticker's callback: it takes the timers due from every
// bucket whose tick has come, runs them, and sets the ticker for the next
// tick while any timer is armed.
func (w *Wheel) advance() {
	w.mu.Lock()
	if w.closed || w.busy {
		// Closed; or another advance is running, which sets the ticker
		// again when it is done.
		if w.closed {
			w.ticking = false
		}
		w.mu.Unlock()
		return
	}
	w.busy = true
	w.running.Add(1)
	defer w.running.Done()
	now := w.now()
	due := w.due[:0]
	for ; w.pos*w.tick <= now; w.pos++ {
		head := &w.slots[w.pos&(wheelSlots-1)]
		for e := head.next; e != head; {
			next := e.next
			if e.at <= now {
				w.unlink(e)
				due = append(due, e)
			}
			e = next
		}
		if w.armed == 0 {
			w.pos = max(w.pos+1, now/w.tick+1) // nothing left to pass over
			break
		}
	}
	w.fired += uint64(len(due))
	w.mu.Unlock()
	for i, e := range due {
		e.f()
		due[i] = nil
	}
	w.mu.Lock()
	w.due = due[:0]
	w.busy = false
	if w.armed > 0 && !w.closed {
		w.wake = w.pos
		w.ticker.Reset(time.Duration(max(w.pos*w.tick-w.now(), 0)))
	} else {
		w.ticking = false
	}
	w.mu.Unlock()
}

// Close stops the ticker and waits for the callbacks running to return;
// timers armed afterwards never fire. It must not be called from a
// callback. The Wheel's owner closes it once every Conn on it is closed
// (their timers stopped), so that no goroutine of the wheel outlives it.
func (w *Wheel) Close() {
	w.mu.Lock()
	w.closed = true
	if w.ticker != nil && w.ticker.Stop() {
		w.ticking = false
	}
	w.mu.Unlock()
	w.running.Wait()
}

// Fired returns how many callbacks the wheel has run.
func (w *Wheel) Fired() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fired
}

// Armed returns how many timers are armed.
func (w *Wheel) Armed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.armed
}
