package wsbridge

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode/internal/timerwheel"
)

// Watchdog enforces the timeouts of one session, of the relay or of a Mux:
// the session records its activity and writes in it, and it calls the
// session's check every period, on a timer (no goroutine of its own; the
// bridge's timer wheel, see Sched), until the check says to stop or stop
// is called. A check must not block: on the wheel it runs in turn with
// the others.
//
// Lock order: mu is a leaf; a check runs without it.
type Watchdog struct {
	start  time.Time
	period time.Duration
	idle   time.Duration // the idle timeout; <= 0 disables it
	write  time.Duration // the write timeout; <= 0 disables it

	lastActive atomic.Int64 // now() of the last message either way
	writeStart atomic.Int64 // now() + 1 of the write in progress; 0 when none

	// Sched, if set before Run, runs the checks (the bridge's timer
	// wheel, shared by its sessions); nil means a runtime timer of the
	// Watchdog's own, whose every check starts a goroutine.
	Sched timerwheel.Scheduler

	mu      sync.Mutex
	timer   timerwheel.Timer
	check   func(now int64) bool
	stopped bool
	running sync.WaitGroup // a check in progress
}

// WatchPeriod is how often a Watchdog checks: an eighth of the shortest of
// timeouts (those > 0), at least 5 ms and at most ceiling.
func WatchPeriod(ceiling time.Duration, timeouts ...time.Duration) time.Duration {
	shortest := ceiling * 8
	for _, t := range timeouts {
		if t > 0 {
			shortest = min(shortest, t)
		}
	}
	return min(max(shortest/8, 5*time.Millisecond), ceiling)
}

// NewWatchdog returns a Watchdog whose session is active now.
func NewWatchdog(period, idle, write time.Duration) *Watchdog {
	w := &Watchdog{start: time.Now(), period: period, idle: idle, write: write}
	w.Active()
	return w
}

// Now is the monotonic time since the Watchdog was made, in nanoseconds.
func (w *Watchdog) Now() int64 { return int64(time.Since(w.start)) }

// Active records a message either way.
func (w *Watchdog) Active() { w.lastActive.Store(w.Now()) }

// IdleFor reports whether no message has gone either way for the idle
// timeout.
func (w *Watchdog) IdleFor(now int64) bool {
	return w.idle > 0 && now-w.lastActive.Load() >= int64(w.idle)
}

// Stalled reports whether a write has been in progress for the write
// timeout: the peer does not read, and no close handshake is possible.
func (w *Watchdog) Stalled(now int64) bool {
	ws := w.writeStart.Load()
	return w.write > 0 && ws != 0 && now-(ws-1) >= int64(w.write)
}

// Write sends p to l; a message written counts as activity. The check
// enforces the write timeout (see Stalled), which costs nothing per write.
func (w *Watchdog) Write(l Link, p []byte) error { return w.timed(l.Write, p) }

// WriteText sends the relay's text message p to l, as Write does.
func (w *Watchdog) WriteText(l RelayLink, p []byte) error { return w.timed(l.WriteText, p) }

// timed runs write(p) as a write the check times.
func (w *Watchdog) timed(write func([]byte) error, p []byte) error {
	w.writeStart.Store(w.Now() + 1)
	err := write(p)
	w.writeStart.Store(0)
	if err == nil {
		w.Active()
	}
	return err
}

// Flush sends what l holds (see Link.Hold), as Write writes: the check
// enforces the write timeout.
func (w *Watchdog) Flush(l Link) error {
	w.writeStart.Store(w.Now() + 1)
	err := l.Flush()
	w.writeStart.Store(0)
	return err
}

// Run calls check every period until it returns false or stop is called.
func (w *Watchdog) Run(check func(now int64) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.check = check
	w.timer = timerwheel.AfterFunc(w.Sched, w.period, w.fire)
}

func (w *Watchdog) fire() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.running.Add(1)
	defer w.running.Done()
	check := w.check
	w.mu.Unlock()
	again := check(w.Now())
	w.mu.Lock()
	if again && !w.stopped {
		w.timer.Reset(w.period)
	}
	w.mu.Unlock()
}

// Stop stops the checks and waits for one in progress to return. It must
// not be called from a check.
func (w *Watchdog) Stop() {
	w.mu.Lock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
	w.running.Wait()
}
