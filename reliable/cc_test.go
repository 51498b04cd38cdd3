package reliable

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCongestion drives the congestion controller through rounds of acks
// with given RTT samples and a loss in some, and checks the window.
func TestCongestion(t *testing.T) {
	const pkt = 1200
	const base = 4 * time.Millisecond
	tests := []struct {
		name string
		// rtts returns the RTT sample of packet i of round r.
		rtts   func(r, i int) time.Duration
		lossAt int // the round with a loss, -1 for none
		want   func(t *testing.T, g *congestion, before float64)
	}{
		{"slow start doubles each round", func(int, int) time.Duration { return base }, -1,
			func(t *testing.T, g *congestion, before float64) {
				assert.Equal(t, float64(initialCwnd*pkt)*8, g.cwnd, "32 packets doubled three times")
			}},
		{"a loss with every sample delayed by a queue cuts", func(r, i int) time.Duration {
			if r >= 1 { // a round of delayed samples, then the loss
				return base + 5*time.Millisecond
			}
			return base
		}, 2, func(t *testing.T, g *congestion, before float64) {
			assert.Equal(t, uint64(1), g.cuts)
			assert.Equal(t, before*lossBeta, g.cwnd, "cut; the rest of the flight was sent before the cut: no growth")
		}},
		{"a loss under jitter and reordering does not cut", func(r, i int) time.Duration {
			if i%3 == 0 {
				return base + 3*time.Millisecond // a reordered or jittered packet
			}
			return base + time.Duration(i%2)*time.Millisecond/2
		}, 2, func(t *testing.T, g *congestion, before float64) {
			assert.Zero(t, g.cuts)
			assert.Equal(t, float64(initialCwnd*pkt)*8, g.cwnd)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := new(congestion)
			*g = newCongestion(pkt, 1536)
			// The acks clock the sender: each ack of this round's
			// flight makes room for packets of the next round's.
			var flight []int64 // send stamps
			fill := func(now int64) []int64 {
				var next []int64
				for !g.full(pkt) {
					g.sent(pkt)
					next = append(next, now)
				}
				return next
			}
			flight = fill(0)
			before := 0.0
			for r := range 3 {
				var next []int64
				srtt := base
				for i, sentAt := range flight {
					now := sentAt + int64(tc.rtts(r, i))
					g.rttSample(tc.rtts(r, i), srtt, now)
					if r == tc.lossAt && i == len(flight)/2 {
						before = g.cwnd
						g.lost(sentAt, now)
						g.lost(sentAt, now) // a second loss of the same flight: no second cut
					}
					g.acked(pkt, sentAt, now, srtt)
					g.left(pkt)
					next = append(next, fill(now)...)
				}
				flight = next
			}
			for range flight {
				g.left(pkt)
			}
			assert.Zero(t, g.inflight)
			tc.want(t, g, before)
		})
	}

	t.Run("an application-limited sender does not grow the window", func(t *testing.T) {
		g := newCongestion(pkt, 1536)
		for range 1000 {
			g.sent(pkt)
			g.acked(pkt, 0, 0, 0)
			g.left(pkt)
		}
		assert.Equal(t, float64(initialCwnd*pkt), g.cwnd)
	})
	t.Run("after a cut the window regains 90% within 5 s at 50 ms", func(t *testing.T) {
		const rtt = 50 * time.Millisecond
		g := new(congestion)
		*g = newCongestion(pkt, 8192)
		g.cwnd, g.ssthresh = 4000*pkt, 4000*pkt
		g.minRTT, g.roundMin, g.lastRoundMin = int64(rtt), int64(2*rtt), int64(2*rtt) // a queue
		before := g.cwnd
		g.lost(1, 1)
		require.Equal(t, before*lossBeta, g.cwnd)
		now := int64(2)
		for range 100 { // 5 s of round trips, each acking a window sent together
			n := int(g.cwnd / pkt)
			for range n {
				g.sent(pkt)
			}
			for range n {
				g.acked(pkt, now, now+int64(rtt), rtt)
				g.left(pkt)
			}
			now += int64(rtt)
		}
		assert.GreaterOrEqual(t, g.cwnd, 0.9*before, "NewReno's packet per RTT would be at %v", before*lossBeta+100*pkt)
		assert.LessOrEqual(t, g.cwnd, 1.1*before, "near the last peak the curve is flat")
	})
	t.Run("the window stays within its bounds", func(t *testing.T) {
		g := newCongestion(pkt, 64)
		for i := range 1000 {
			g.sent(64 * pkt)
			g.acked(64*pkt, int64(i), int64(i), 0)
			g.left(64 * pkt)
		}
		assert.Equal(t, float64(64*pkt), g.cwnd)
		g.rttSample(time.Millisecond, time.Millisecond, 0)
		for i := range 100 {
			now := int64(i+1) * int64(100*time.Millisecond)
			g.rttSample(time.Second, time.Second, now) // a queue of a second
			g.lost(now-1, now)
		}
		assert.Equal(t, float64(minCwnd*pkt), g.cwnd)
	})
}

// TestAckNow shows that a sender that waits for an ack asks for it at
// once: after a write that the window takes whole, and when the window is
// full, the receiver acks the last packet without waiting out its ack
// delay, though fewer than ackEvery packets came.
func TestAckNow(t *testing.T) {
	for _, size := range []int{3000, 200_000} {
		l := newCoreLink(t, 0, 0, 1)
		a, b := l.a, l.b
		a.chans[0].snd.write(make([]byte, 1)) // the first packet is out of order to b: acked at once
		a.flush()
		l.toB.deliver(b, l.now)
		l.toA.deliver(a, l.now)
		a.chans[0].snd.write(make([]byte, size))
		a.flush()
		sent := l.toB.n
		require.Positive(t, sent)
		if size > 3000 {
			assert.True(t, a.cc.full(0), "the window is full: %d in flight, window %v", a.cc.inflight, a.cc.cwnd)
		} else {
			assert.Zero(t, a.chans[0].snd.queued(), "all sent")
		}
		l.toB.deliver(b, l.now)
		assert.Equal(t, sent/ackEvery+1, l.toA.n, "%d bytes in %d packets: an ack every %d and one for the last", size, sent, ackEvery)
		assert.Zero(t, b.recvSinceSend, "no ack left owed")
	}
}
