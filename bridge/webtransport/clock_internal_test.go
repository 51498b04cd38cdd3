package webtransport

import (
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/assert"

	"github.com/gonetcode/netcode/bridge/internal/wsbridge"
)

// TestOneClock is issue 32's one-clock rule for WebTransport sessions:
// CloseBy's bound comes back as set, with its monotonic reading (kept as
// Unix nanoseconds, as before, it came back without one, and a step of
// the wall clock moved it), and the datagram limit is probed again at
// most once a probeEvery of monotonic instants, whatever the wall clock
// reads.
func TestOneClock(t *testing.T) {
	var l link
	def := l.closeBound()
	assert.InDelta(t, wsbridge.CloseTimeout, time.Until(def), float64(100*time.Millisecond), "CloseTimeout by default")
	for _, d := range []time.Duration{-time.Second, 0, 3 * time.Second, time.Hour} {
		set := time.Now().Add(d)
		l.CloseBy(set)
		got := l.closeBound()
		assert.True(t, got.Equal(set), "%v: %v, set %v", d, got, set)
		assert.Contains(t, got.String(), " m=", "%v: measured on the monotonic clock", d)
	}

	// The probe interval, on the instants passed in.
	probes := 0
	limit := 1000
	send := func([]byte) error {
		probes++
		return &quic.DatagramTooLargeError{MaxDatagramPayloadSize: int64(limit + prefixBytes)}
	}
	var m maxSize
	now := int64(5 * time.Second)
	m.init(send, now)
	assert.Equal(t, 1, probes)
	assert.Equal(t, limit, m.current(now))
	limit = 1100 // path MTU discovery found more
	clock := func() int64 { return now }
	for _, st := range []struct {
		at     time.Duration
		probes int
		err    bool
	}{
		{500 * time.Millisecond, 1, true}, // too soon to probe again
		{probeEvery - 1, 1, true},
		{probeEvery, 2, false},
		{probeEvery + 10*time.Millisecond, 2, false}, // fits the new limit
	} {
		now = int64(5*time.Second + st.at)
		err := m.check(1050, clock)
		assert.Equal(t, st.err, err != nil, "at %v: %v", st.at, err)
		assert.Equal(t, st.probes, probes, "at %v", st.at)
	}
}
