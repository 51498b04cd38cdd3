package deadline

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

// The tests run in synctest bubbles: time is simulated, so a deadline an
// hour away is tested in no time, and a wait ends exactly when the timers
// due before it have fired.

func closedWithin(c <-chan struct{}, d time.Duration) bool {
	select {
	case <-c:
		return true
	case <-time.After(d):
		return false
	}
}

func closedNow(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func TestDeadline(t *testing.T) {
	for _, tc := range []struct {
		name    string
		set     []time.Duration // offsets from now; 0 means the zero time (clear)
		expired bool
	}{
		{"none", nil, false},
		{"past", []time.Duration{-time.Second}, true},
		{"future", []time.Duration{time.Hour}, false},
		{"past then cleared", []time.Duration{-time.Second, 0}, false},
		{"future then past", []time.Duration{time.Hour, -time.Second}, true},
		{"past then future", []time.Duration{-time.Second, time.Hour}, false},
		{"soon", []time.Duration{5 * time.Millisecond}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var d Deadline
				for _, off := range tc.set {
					if off == 0 {
						d.Set(time.Time{})
					} else {
						d.Set(time.Now().Add(off))
					}
				}
				// An hour less a nanosecond: "future" has not passed yet.
				assert.Equal(t, tc.expired, closedWithin(d.Wait(), time.Hour-time.Nanosecond))
				assert.Equal(t, tc.expired, d.Expired())
			})
		})
	}
}

// TestDeadlineFiresOnTime checks that the deadline passes at its time, not
// a moment before.
func TestDeadlineFiresOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var d Deadline
		d.Set(time.Now().Add(200 * time.Millisecond))
		w := d.Wait()
		time.Sleep(200*time.Millisecond - time.Nanosecond)
		synctest.Wait()
		assert.False(t, d.Expired(), "expired early")
		assert.False(t, closedNow(w))
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		assert.True(t, d.Expired(), "not expired at its time")
		assert.True(t, closedNow(w))
	})
}

func TestWaitSeesLaterSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var d Deadline
		d.Set(time.Now().Add(time.Hour))
		w := d.Wait()
		d.Set(time.Now().Add(10 * time.Millisecond))
		// The channel taken before the change is the one that fires: a
		// blocked Read sees a shortened deadline, at its new time.
		start := time.Now()
		<-w
		assert.Equal(t, 10*time.Millisecond, time.Since(start))
	})
}

// TestStop checks that a stopped deadline does not pass later, and that Stop
// leaves a passed deadline passed.
func TestStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var d Deadline
		d.Set(time.Now().Add(time.Second))
		d.Stop()
		assert.False(t, closedWithin(d.Wait(), time.Hour))
		assert.False(t, d.Expired())

		d.Set(time.Now().Add(-time.Second))
		d.Stop()
		assert.True(t, d.Expired())
	})
}
