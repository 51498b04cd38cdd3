package bridge

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// watchdog enforces the timeouts of one session, of the relay or of a Mux:
// the session records its activity and writes in it, and it calls the
// session's check every period, on a timer (no goroutine of its own),
// until the check says to stop or stop is called.
//
// Lock order: mu is a leaf; a check runs without it.
type watchdog struct {
	start  time.Time
	period time.Duration
	idle   time.Duration // the idle timeout; <= 0 disables it
	write  time.Duration // the write timeout; <= 0 disables it

	lastActive atomic.Int64 // now() of the last message either way
	writeStart atomic.Int64 // now() + 1 of the write in progress; 0 when none

	mu      sync.Mutex
	timer   *time.Timer
	check   func(now int64) bool
	stopped bool
	running sync.WaitGroup // a check in progress
}

// watchPeriod is how often a watchdog checks: an eighth of the shortest of
// timeouts (those > 0), at least 5 ms and at most ceiling.
func watchPeriod(ceiling time.Duration, timeouts ...time.Duration) time.Duration {
	shortest := ceiling * 8
	for _, t := range timeouts {
		if t > 0 {
			shortest = min(shortest, t)
		}
	}
	return min(max(shortest/8, 5*time.Millisecond), ceiling)
}

// newWatchdog returns a watchdog whose session is active now.
func newWatchdog(period, idle, write time.Duration) *watchdog {
	w := &watchdog{start: time.Now(), period: period, idle: idle, write: write}
	w.active()
	return w
}

// now is the monotonic time since the watchdog was made, in nanoseconds.
func (w *watchdog) now() int64 { return int64(time.Since(w.start)) }

// active records a message either way.
func (w *watchdog) active() { w.lastActive.Store(w.now()) }

// idleFor reports whether no message has gone either way for the idle
// timeout.
func (w *watchdog) idleFor(now int64) bool {
	return w.idle > 0 && now-w.lastActive.Load() >= int64(w.idle)
}

// stalled reports whether a write has been in progress for the write
// timeout: the peer does not read, and no close handshake is possible.
func (w *watchdog) stalled(now int64) bool {
	ws := w.writeStart.Load()
	return w.write > 0 && ws != 0 && now-(ws-1) >= int64(w.write)
}

// writeMessage writes one message to ws; a message written counts as
// activity. The context has no deadline, which costs nothing per write:
// the check enforces the write timeout (see stalled).
func (w *watchdog) writeMessage(ws *websocket.Conn, typ websocket.MessageType, p []byte) error {
	w.writeStart.Store(w.now() + 1)
	err := ws.Write(context.Background(), typ, p)
	w.writeStart.Store(0)
	if err == nil {
		w.active()
	}
	return err
}

// flush sends what c holds (see batchConn), as writeMessage writes: the
// check enforces the write timeout.
func (w *watchdog) flush(c *batchConn) error {
	w.writeStart.Store(w.now() + 1)
	err := c.flush()
	w.writeStart.Store(0)
	return err
}

// run calls check every period until it returns false or stop is called.
func (w *watchdog) run(check func(now int64) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.check = check
	w.timer = time.AfterFunc(w.period, w.fire)
}

func (w *watchdog) fire() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.running.Add(1)
	defer w.running.Done()
	check := w.check
	w.mu.Unlock()
	again := check(w.now())
	w.mu.Lock()
	if again && !w.stopped {
		w.timer.Reset(w.period)
	}
	w.mu.Unlock()
}

// stop stops the checks and waits for one in progress to return. It must
// not be called from a check.
func (w *watchdog) stop() {
	w.mu.Lock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
	w.running.Wait()
}
