package deadline

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func closedWithin(c <-chan struct{}, d time.Duration) bool {
	select {
	case <-c:
		return true
	case <-time.After(d):
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
			var d Deadline
			for _, off := range tc.set {
				if off == 0 {
					d.Set(time.Time{})
				} else {
					d.Set(time.Now().Add(off))
				}
			}
			assert.Equal(t, tc.expired, closedWithin(d.Wait(), 200*time.Millisecond))
			assert.Equal(t, tc.expired, d.Expired())
		})
	}
}

func TestWaitSeesLaterSet(t *testing.T) {
	var d Deadline
	d.Set(time.Now().Add(time.Hour))
	w := d.Wait()
	d.Set(time.Now().Add(10 * time.Millisecond))
	// The channel taken before the change is the one that fires: a blocked
	// Read sees a shortened deadline.
	assert.True(t, closedWithin(w, time.Second))
}
