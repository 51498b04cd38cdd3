package engine

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTickerKeepsEarlierDeadline runs a Listener's ticker on simulated
// time: Update runs at once, then at the deadline it returned; a deadline
// given from outside that is earlier wakes it, a later one does not; and
// one given while Update runs is kept when Update's own answer is later
// (the lost wake-up of an updater that overwrote it).
func TestTickerKeepsEarlierDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		k := NewTicker()
		stop := make(chan struct{})
		var (
			rec    record
			during atomic.Pointer[time.Time] // a deadline to give while Update runs
		)
		done := make(chan struct{})
		go func() {
			defer close(done)
			k.Run(stop, time.Second, func(now time.Time) time.Time {
				rec.add(now.Sub(start))
				if d := during.Swap(nil); d != nil {
					k.Earlier(*d) // as a reader would, between Update and its answer
				}
				return now.Add(100 * time.Millisecond)
			})
		}()
		synctest.Wait()
		require.Equal(t, []time.Duration{0}, rec.get(), "the first Update runs at once")

		k.Earlier(start.Add(500 * time.Millisecond)) // later than planned: no wake
		synctest.Wait()
		assert.Len(t, rec.get(), 1)
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		assert.Equal(t, []time.Duration{0, 100 * time.Millisecond}, rec.get(), "at the deadline Update returned")

		k.Earlier(time.Now().Add(10 * time.Millisecond)) // earlier: wakes it
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		runs := rec.get()
		assert.Equal(t, 110*time.Millisecond, runs[len(runs)-1])

		soon := start.Add(230 * time.Millisecond)
		during.Store(&soon)
		time.Sleep(100 * time.Millisecond) // the Update at 210 ms gives 230 ms while it runs
		synctest.Wait()
		n := len(rec.get())
		time.Sleep(20 * time.Millisecond)
		synctest.Wait()
		runs = rec.get()
		require.Len(t, runs, n+1, "the deadline given during Update was lost")
		assert.Equal(t, 230*time.Millisecond, runs[n])

		close(stop)
		<-done
	})
}

// TestDueScheduleAndPostpone runs a dialed Conn's deadline timer on
// simulated time: Schedule arms it no later than a deadline and leaves a
// sooner one alone; Postpone moves it later only by more than
// PostponeSlack; the callback clears the deadline it ran for; Stop stops
// it for good.
func TestDueScheduleAndPostpone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var d Due
		var rec record
		d.Init(nil, nil, func() { rec.add(time.Since(start)) })

		d.Schedule(start.Add(100 * time.Millisecond))
		d.Schedule(start.Add(200 * time.Millisecond)) // later: left alone
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		require.Equal(t, []time.Duration{100 * time.Millisecond}, rec.get())

		d.Schedule(time.Now().Add(100 * time.Millisecond))               // 200 ms
		d.Postpone(time.Now().Add(100*time.Millisecond + PostponeSlack)) // within the slack: stays
		d.Postpone(time.Now().Add(150 * time.Millisecond))               // 250 ms
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		assert.Len(t, rec.get(), 1, "postponed")
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		assert.Equal(t, []time.Duration{100 * time.Millisecond, 250 * time.Millisecond}, rec.get())

		d.Schedule(time.Now().Add(10 * time.Millisecond))
		d.Stop()
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Len(t, rec.get(), 2, "stopped")
		d.Schedule(time.Now().Add(10 * time.Millisecond)) // arms nothing after Stop
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Len(t, rec.get(), 2)
	})
}

// record is when a callback ran, for a test to look at from its own
// goroutine.
type record struct {
	mu sync.Mutex
	at []time.Duration
}

func (r *record) add(d time.Duration) {
	r.mu.Lock()
	r.at = append(r.at, d)
	r.mu.Unlock()
}

func (r *record) get() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.at...)
}

// TestDueKeepsDeadlineGivenDuringCallback: a deadline given while the
// callback runs (a reader's, between the core's Update and the callback's
// own Schedule of its later answer) is kept: the callback cleared the
// deadline it ran for as it began, and Schedule only moves the timer
// earlier. A dialed Conn's updater that overwrote it answered a challenge
// a resend late.
func TestDueKeepsDeadlineGivenDuringCallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var (
			d   Due
			rec record
		)
		first := true
		d.Init(nil, nil, func() {
			rec.add(time.Since(start))
			if first {
				first = false
				d.Schedule(time.Now().Add(10 * time.Millisecond)) // the reader, meanwhile
			}
			d.Schedule(time.Now().Add(100 * time.Millisecond)) // the callback's own answer
		})
		d.Schedule(start.Add(100 * time.Millisecond))
		time.Sleep(110 * time.Millisecond)
		synctest.Wait()
		assert.Equal(t, []time.Duration{100 * time.Millisecond, 110 * time.Millisecond}, rec.get(),
			"the deadline given during the callback was lost")
		d.Stop()
	})
}
