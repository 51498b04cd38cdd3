package reliable

import (
	"math"
	"time"
)

// congestion is the connection's congestion controller, CUBIC (RFC 9438)
// with a loss response that tells a queue from random loss: cwnd bounds
// the bytes of data packets in flight (sent, neither acknowledged nor
// shown lost), and the send budget paces them at a multiple of cwnd per
// smoothed RTT. It starts at initialCwnd packets and doubles every RTT
// (slow start) until the first loss; at each loss it is cut to lossBeta
// of itself, once per round trip (a loss of a packet sent before the last
// cut does not cut again), and then grows along CUBIC's curve back to
// the window before the cut and past it: quickly at first, flat near it,
// in a time that does not depend on the RTT (about 4 s to regain 90% of
// a 4,000-packet window, where NewReno's packet per RTT takes a minute
// at 50 ms), and no slower than NewReno would (CUBIC's Reno-friendly
// window), which rules on paths of short RTT.
//
// A loss is a chunk resent: because the acks of later packets showed it
// lost and its own ack is overdue, or because its resend timeout expired.
// It cuts the window only when the RTT shows a queue, as the losses of a
// queue that overflows do: every RTT sample of the last round trip (the
// least of them) is more than a queue delay above the least RTT of the
// last minRTTWindow. Jitter and reordering delay some samples; a queue
// delays them all. A
// path that drops packets at random without queueing (a radio link, a
// lossy hop) keeps its rate, where a loss-only controller would collapse
// (NewReno gets about 1.2/sqrt(loss) packets per RTT). On a LAN or
// loopback path, where the RTT is well under a millisecond, the window
// reaches what the receiver keeps up with within a few milliseconds, and
// the sockets' buffers are what overflow first: the window backs off
// from there.
//
// The window never exceeds maxCwnd packets, what the packet records can
// tell apart, nor (for the reliable data that fills it) the receive window
// of the peer; Config.SendRate, if set, caps the pacing rate.
type congestion struct {
	cwnd     float64 // bytes that may be in flight
	ssthresh float64 // slow start below it
	inflight int     // bytes of data packets in flight
	recovery int64   // stamp of the last cut: losses of earlier packets do not cut again
	cut      bool    // recovery is set
	minRTT   int64   // least RTT sample of the last minRTTWindow, in nanoseconds; 0: none
	minRTTAt int64   // stamp of minRTT
	// The least RTT sample of this round trip and of the last, in
	// nanoseconds (0: none yet), and when this round began.
	roundMin, lastRoundMin int64
	roundAt                int64
	mss                    float64 // bytes of a packet: the unit of growth
	min, max               float64 // bounds of cwnd, in bytes
	cuts                   uint64  // losses that cut the window (SessionStats)
	// CUBIC's state, in packets and seconds: the window before the last
	// cut, the time the curve takes back to it, when the curve started
	// (the first ack after the cut; 0: not yet), and the Reno-friendly
	// window.
	wmax, k float64
	epoch   int64
	renoWnd float64
}

// Congestion control's constants.
const (
	initialCwnd = 32  // packets: a first flight, as QUIC's 10 with a game server's small packets in mind
	minCwnd     = 4   // packets
	lossBeta    = 0.7 // the window after a cut, as a fraction of before (CUBIC's)
	// paceGain and slowStartGain are the pacing rate, in windows per
	// smoothed RTT, in congestion avoidance and in slow start: pacing
	// spreads a window over less than an RTT so that it never holds the
	// window back.
	paceGain      = 1.25
	slowStartGain = 2
	// minRTTWindow is how long the least RTT sample stands for the
	// path's RTT without a queue.
	minRTTWindow = 10 * time.Second
	// minQueueDelay is the least queueDelay: how far above the least RTT
	// the smoothed RTT must be for a loss to cut the window, which
	// jitter of a millisecond (a scheduler's, a radio's) does not reach.
	minQueueDelay = time.Millisecond
	// cubicC is CUBIC's C, in packets per second cubed.
	cubicC = 0.4
	// renoAlpha is the growth of CUBIC's Reno-friendly window, in
	// packets per RTT: 3(1-β)/(1+β), NewReno's average rate at β.
	renoAlpha = 3 * (1 - lossBeta) / (1 + lossBeta)
)

func newCongestion(maxPacket, maxPackets int) congestion {
	return congestion{
		mss:      float64(maxPacket),
		cwnd:     float64(initialCwnd * maxPacket),
		ssthresh: float64(maxPackets * maxPacket),
		min:      float64(minCwnd * maxPacket),
		max:      float64(maxPackets * maxPacket),
	}
}

// full reports whether n more bytes would exceed the window.
func (g *congestion) full(n int) bool { return float64(g.inflight+n) > g.cwnd }

// sent counts a data packet of n bytes into the flight.
func (g *congestion) sent(n int) { g.inflight += n }

// left takes a packet of n bytes out of the flight: acknowledged, shown
// lost, or forgotten.
func (g *congestion) left(n int) { g.inflight -= n }

// acked grows the window for a packet of n bytes sent at stamp at, now
// (stamp now, smoothed RTT srtt) acknowledged, if the window was in use:
// a sender that leaves the window mostly empty learns nothing about the
// path.
func (g *congestion) acked(n int, at, now int64, srtt time.Duration) {
	if g.cut && at <= g.recovery {
		return // sent before the cut: the cut already accounts for it
	}
	if float64(g.inflight+n) < g.cwnd/2 {
		return
	}
	if g.cwnd < g.ssthresh {
		g.cwnd = min(g.cwnd+float64(n), g.max)
		return
	}
	mp := g.mss
	w := g.cwnd / mp // packets
	if g.epoch == 0 {
		g.epoch = max(now, 1)
		g.k = 0
		if g.wmax > w {
			g.k = math.Cbrt((g.wmax - w) / cubicC)
		} else {
			g.wmax = w
		}
		g.renoWnd = w
	}
	acked := float64(n) / mp
	g.renoWnd += renoAlpha * acked / w
	// The curve one RTT ahead, no more than 1.5 windows.
	t := float64(now-g.epoch)/1e9 + srtt.Seconds() - g.k
	target := min(max(cubicC*t*t*t+g.wmax, w), 1.5*w)
	if target < g.renoWnd {
		target = g.renoWnd
	}
	g.cwnd = min(g.cwnd+mp*(target-w)*acked/w, g.max)
}

// rttSample takes an RTT sample d at stamp now into the least RTTs; srtt
// is the smoothed RTT, the length of a round.
func (g *congestion) rttSample(d, srtt time.Duration, now int64) {
	v := int64(d)
	if g.minRTT == 0 || v <= g.minRTT || now-g.minRTTAt > int64(minRTTWindow) {
		g.minRTT, g.minRTTAt = v, now
	}
	if now-g.roundAt > int64(srtt) {
		g.lastRoundMin, g.roundMin, g.roundAt = g.roundMin, 0, now
	}
	if g.roundMin == 0 || v < g.roundMin {
		g.roundMin = v
	}
}

// queueing reports whether the RTT samples show a queue on the path: the
// least of this round and the last is more than the queue delay above
// the least RTT: half the least RTT, and at least minQueueDelay.
func (g *congestion) queueing() bool {
	recent := g.roundMin
	if g.lastRoundMin > 0 {
		recent = min(recent, g.lastRoundMin)
	}
	return g.minRTT > 0 && recent > g.minRTT+max(g.minRTT/2, int64(minQueueDelay))
}

// lost cuts the window for a chunk last sent at stamp at, now resent, if
// the RTT shows a queue and no cut since the chunk was sent covers it;
// now is the current stamp.
func (g *congestion) lost(at, now int64) {
	if g.cut && at <= g.recovery || !g.queueing() {
		return
	}
	w := g.cwnd / g.mss // packets
	if w < g.wmax {
		g.wmax = w * (1 + lossBeta) / 2 // a lower peak than the last: make room for newcomers sooner
	} else {
		g.wmax = w
	}
	g.epoch = 0
	g.cwnd = max(g.cwnd*lossBeta, g.min)
	g.ssthresh = g.cwnd
	g.recovery, g.cut = now, true
	g.cuts++
}

// pace returns the pacing rate for a smoothed RTT of srtt seconds.
func (g *congestion) pace(srtt float64) float64 {
	gain := paceGain
	if g.cwnd < g.ssthresh {
		gain = slowStartGain
	}
	return gain * g.cwnd / srtt
}
