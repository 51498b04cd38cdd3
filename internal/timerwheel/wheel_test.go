package timerwheel

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestNeverEarly arms timers at various delays and checks that each runs
// once, at or after its time. It runs on simulated time (a synctest
// bubble): once every goroutine is idle two ticks after the last call, a
// second call would have run.
func TestNeverEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const tick = 5 * time.Millisecond
		w := New(tick)
		defer w.Close()
		delays := []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 12 * time.Millisecond, 50 * time.Millisecond, 700 * time.Millisecond}
		type result struct {
			armed, ran time.Time
			n          atomic.Int32
		}
		rs := make([]*result, len(delays))
		var wg sync.WaitGroup
		for i, d := range delays {
			r := &result{armed: time.Now()}
			rs[i] = r
			wg.Add(1)
			w.AfterFunc(d, func() {
				if r.n.Add(1) == 1 {
					r.ran = time.Now()
					wg.Done()
				}
			})
		}
		wg.Wait()
		time.Sleep(2 * tick)
		synctest.Wait()
		for i, d := range delays {
			r := rs[i]
			assert.EqualValues(t, 1, r.n.Load(), "delay %v: calls", d)
			assert.GreaterOrEqual(t, r.ran.Sub(r.armed), d, "delay %v: ran early", d)
			assert.Less(t, r.ran.Sub(r.armed), d+tick, "delay %v: more than a tick late", d)
		}
		assert.Zero(t, w.Armed())
		assert.EqualValues(t, len(delays), w.Fired())
	})
}

// TestTimerContract checks that Reset and Stop report what *time.Timer's
// do, which a dialed Conn counts its pending calls by.
func TestTimerContract(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, s Scheduler) (calls int32)
	}{
		{"stop armed", func(t *testing.T, s Scheduler) int32 {
			var n atomic.Int32
			tm := s.AfterFunc(time.Hour, func() { n.Add(1) })
			assert.True(t, tm.Stop(), "Stop of an armed timer")
			assert.False(t, tm.Stop(), "Stop of a stopped timer")
			return n.Load()
		}},
		{"reset armed moves it", func(t *testing.T, s Scheduler) int32 {
			var n atomic.Int32
			done := make(chan struct{})
			tm := s.AfterFunc(time.Hour, func() { n.Add(1); close(done) })
			assert.True(t, tm.Reset(time.Millisecond), "Reset of an armed timer")
			<-done
			return n.Load()
		}},
		{"reset after the call is a new call", func(t *testing.T, s Scheduler) int32 {
			var n atomic.Int32
			calls := make(chan struct{}, 2)
			tm := s.AfterFunc(time.Millisecond, func() { n.Add(1); calls <- struct{}{} })
			<-calls
			assert.False(t, tm.Stop(), "Stop after the call")
			assert.False(t, tm.Reset(time.Millisecond), "Reset after the call")
			<-calls
			return n.Load()
		}},
		{"a callback re-arms itself", func(t *testing.T, s Scheduler) int32 {
			var n atomic.Int32
			done := make(chan struct{})
			var tm Timer
			var mu sync.Mutex
			mu.Lock()
			tm = s.AfterFunc(time.Millisecond, func() {
				mu.Lock()
				defer mu.Unlock()
				if n.Add(1) < 3 {
					tm.Reset(time.Millisecond)
				} else {
					close(done)
				}
			})
			mu.Unlock()
			<-done
			return n.Load()
		}},
	}
	want := map[string]int32{"stop armed": 0, "reset armed moves it": 1, "reset after the call is a new call": 2, "a callback re-arms itself": 3}
	for _, tt := range tests {
		for _, s := range []struct {
			name string
			s    Scheduler
		}{{"runtime", nil}, {"wheel", New(time.Millisecond)}} {
			t.Run(tt.name+"/"+s.name, func(t *testing.T) {
				var sch Scheduler = runtimeTimers{}
				if s.s != nil {
					sch = s.s
					defer s.s.(*Wheel).Close()
				}
				assert.Equal(t, want[tt.name], tt.run(t, sch))
			})
		}
	}
}

// runtimeTimers is time.AfterFunc as a Scheduler: the contract the wheel
// must match.
type runtimeTimers struct{}

func (runtimeTimers) AfterFunc(d time.Duration, f func()) Timer { return AfterFunc(nil, d, f) }

// TestManyTimers arms and moves many timers from several goroutines, as
// the relay's Conns do on every payload, and checks that each runs
// exactly once after its last Reset.
func TestManyTimers(t *testing.T) {
	w := New(2 * time.Millisecond)
	defer w.Close()
	const n = 500
	var calls [n]atomic.Int32
	var wg sync.WaitGroup
	wg.Add(n)
	timers := make([]Timer, n)
	for i := range timers {
		timers[i] = w.AfterFunc(time.Hour, func() {
			calls[i].Add(1)
			wg.Done()
		})
	}
	var movers sync.WaitGroup
	for g := range 4 {
		movers.Add(1)
		go func() {
			defer movers.Done()
			for i := g; i < n; i += 4 {
				for k := range 5 {
					require.True(t, timers[i].Reset(time.Duration(k+i%30)*time.Millisecond+time.Hour/time.Duration(k+1)))
				}
				require.True(t, timers[i].Reset(time.Duration(i%40)*time.Millisecond))
			}
		}()
	}
	movers.Wait()
	wg.Wait()
	for i := range calls {
		assert.EqualValues(t, 1, calls[i].Load(), "timer %d", i)
	}
	assert.Zero(t, w.Armed())
}

// TestIdleWheelTicksNot checks, on simulated time, that a wheel with
// nothing armed does not tick, and that arming after a long idle spell runs
// on time (the wheel does not pass over the buckets it slept through one
// by one).
func TestIdleWheelTicksNot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := New(time.Millisecond)
		defer w.Close()
		done := make(chan struct{})
		w.AfterFunc(0, func() { close(done) })
		<-done
		time.Sleep(30 * time.Millisecond)
		synctest.Wait()
		w.mu.Lock()
		ticking := w.ticking
		w.mu.Unlock()
		assert.False(t, ticking, "a wheel with nothing armed keeps ticking")
		start := time.Now()
		done = make(chan struct{})
		w.AfterFunc(3*time.Millisecond, func() { close(done) })
		<-done
		assert.GreaterOrEqual(t, time.Since(start), 3*time.Millisecond)
		assert.LessOrEqual(t, time.Since(start), 4*time.Millisecond, "on time after the idle spell")
	})
}

// TestClose checks, on simulated time, that Close waits for a callback in
// progress and that nothing runs after it.
func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := New(time.Millisecond)
		in, release := make(chan struct{}), make(chan struct{})
		var after atomic.Bool
		var closed atomic.Bool
		w.AfterFunc(0, func() {
			close(in)
			<-release
			if closed.Load() {
				after.Store(true)
			}
		})
		<-in
		w.AfterFunc(0, func() { after.Store(true) })
		returned := make(chan struct{})
		go func() {
			w.Close()
			closed.Store(true)
			close(returned)
		}()
		synctest.Wait() // Close is waiting, or has returned
		select {
		case <-returned:
			t.Fatal("Close returned while a callback was running")
		default:
		}
		close(release)
		<-returned
		w.AfterFunc(0, func() { after.Store(true) })
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		assert.False(t, after.Load(), "a callback ran after Close")
	})
}

// TestContext checks that a context carries its Scheduler to From.
func TestContext(t *testing.T) {
	w := New(0)
	defer w.Close()
	assert.Nil(t, From(context.Background()))
	assert.Same(t, w, From(With(context.Background(), w)))
}
