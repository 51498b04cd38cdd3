package layer

import (
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// liveConfig is a live connection's configuration: the defaults.
var liveConfig = Config{}

// pair is two connected Transports on a simulated path.
type pair struct {
	a, b *side
}

func newPair(t *testing.T, cfg Config) *pair {
	return &pair{a: newSide(t, cfg, 0), b: newSide(t, cfg, 0)}
}

// step advances both sides by dt and delivers what they sent, each
// datagram kept unless lose says otherwise; it returns the errors of
// Update.
func (p *pair) step(t *testing.T, dt float64, lose func() bool) {
	t.Helper()
	for _, s := range []*side{p.a, p.b} {
		s.now += dt
		require.NoError(t, s.t.Update(at(s.now)))
	}
	for _, d := range p.a.take() {
		if lose == nil || !lose() {
			_ = p.b.t.Receive(d)
		}
	}
	for _, d := range p.b.take() {
		if lose == nil || !lose() {
			_ = p.a.t.Receive(d)
		}
	}
}

// hostile builds a datagram with the given ack sequence and transport
// header, carrying n bytes of data.
func hostile(ackSeq uint16, reliable bool, seq, count, index uint16, n int) []byte {
	b := make([]byte, AckHeaderBytes+HeaderBytes+n)
	binary.LittleEndian.PutUint16(b, ackSeq)
	binary.LittleEndian.PutUint16(b[2:], 65535)
	putHeader(b[AckHeaderBytes:], reliable, seq, count, index, uint16(n))
	return b
}

// TestMemoryBound attacks the receiver's memory (hazard 5): first
// fragments of 2,048 messages of each kind, each claiming the largest
// message they may. cute_net.h allocates 21 MB for each (~43 GB); Go holds at
// most MaxBufferedBytes plus one message, refuses reliable fragments past
// it unacknowledged, and evicts incomplete fire-and-forget ones.
func TestMemoryBound(t *testing.T) {
	cfg := Config{MaxMessageBytes: 512 << 10, MaxBufferedBytes: 1 << 20}
	s := newSide(t, cfg, 0)
	count := uint16(cfg.MaxMessageBytes / FragmentBytes)
	busy := 0
	for i := range 2048 {
		for _, reliable := range []bool{false, true} {
			seq := uint16(i)
			if reliable {
				seq = uint16(i%1000 + 1) // never the next expected (0): no exemption
			}
			err := s.t.Receive(hostile(uint16(2*i+btoi(reliable)), reliable, seq, count, 0, FragmentBytes))
			if err != nil {
				require.ErrorIs(t, err, ErrBusy)
				busy++
			}
			require.LessOrEqual(t, s.t.Buffered(), cfg.MaxBufferedBytes+cfg.MaxMessageBytes)
			require.LessOrEqual(t, s.t.Buffered(), cfg.MaxBufferedBytes, "no exemption was used")
		}
	}
	require.Positive(t, busy)
	require.Positive(t, s.t.Stats().Dropped, "incomplete fire-and-forget messages evicted")
	// The next reliable message is always admitted: the stream progresses.
	require.NoError(t, s.t.Receive(hostile(9000, true, 0, 1, 0, 10)))
	m, reliable, ok := s.t.Peek()
	require.True(t, ok && reliable)
	require.Len(t, m, 10)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestRefusedNotAcked attacks hazard 7: a refused reliable fragment must
// not be acknowledged, or its sender stops resending and the stream
// stalls. A message over the receiver's MaxMessageBytes is refused; the
// sender keeps resending it (and is given up on in the end), instead of
// believing it delivered.
func TestRefusedNotAcked(t *testing.T) {
	p := &pair{a: newSide(t, Config{MaxMessageBytes: 4000}, 0), b: newSide(t, Config{MaxMessageBytes: 2000}, 0)}
	require.NoError(t, p.a.t.Send(make([]byte, 3000), true))
	for range 20 {
		p.step(t, 1.0/16, nil)
	}
	require.Equal(t, 3, p.a.t.Unacked(), "nothing refused was acknowledged")
	require.Positive(t, p.b.t.Stats().Refused)
	_, _, ok := p.b.t.Peek()
	require.False(t, ok)
}

// TestEmptyRefused attacks hazard 8: an empty message is refused on both
// kinds, so no reliable sequence is used that no fragment carries.
func TestEmptyRefused(t *testing.T) {
	p := newPair(t, liveConfig)
	require.ErrorIs(t, p.a.t.Send(nil, true), ErrEmpty)
	require.ErrorIs(t, p.a.t.Send([]byte{}, false), ErrEmpty)
	require.NoError(t, p.a.t.Send([]byte{1}, true))
	for range 4 {
		p.step(t, 1.0/16, nil)
	}
	m, reliable, ok := p.b.t.Peek()
	require.True(t, ok && reliable, "the stream did not stall")
	require.Equal(t, []byte{1}, m)
}

// TestFireAndForgetWhole attacks hazard 9: fire-and-forget messages of
// k·1100 bytes arrive whole.
func TestFireAndForgetWhole(t *testing.T) {
	for _, n := range []int{1100, 2200, 5500} {
		p := newPair(t, liveConfig)
		msg := tagged(3, n)
		require.NoError(t, p.a.t.Send(msg, false))
		for _, d := range p.a.take() {
			require.NoError(t, p.b.t.Receive(d))
		}
		m, reliable, ok := p.b.t.Peek()
		require.True(t, ok)
		require.False(t, reliable)
		require.Equal(t, msg, m, "%d bytes", n)
	}
}

// TestAckOnly attacks hazard 11: a side that only listens still
// acknowledges, with an ack-only datagram, so its peer stops resending;
// the ack-only datagram is never a message; with PiggybackOnly (the C
// behaviour) the peer resends for ever.
func TestAckOnly(t *testing.T) {
	for _, piggyback := range []bool{false, true} {
		p := newPair(t, Config{PiggybackOnly: piggyback, AckTimeout: -1})
		require.NoError(t, p.a.t.Send(tagged(1, 100), true))
		for range 40 {
			p.step(t, 1.0/60, nil)
		}
		if piggyback {
			require.Equal(t, 1, p.a.t.Unacked())
			require.Positive(t, p.a.t.Stats().Resent)
			continue
		}
		require.Zero(t, p.a.t.Unacked())
		require.Equal(t, uint64(1), p.b.t.Stats().AckOnly, "one ack-only datagram, not one per update")
		require.Zero(t, p.a.t.Stats().Resent)
		_, _, ok := p.a.t.Peek()
		require.False(t, ok, "an ack-only datagram is not a message")
	}
	// Its bytes: what a cute_net.h receiver refuses at its index check
	// (index 1 > count 0), after recording it and before allocating.
	s := newSide(t, liveConfig, 0)
	s.t.sendAckOnly()
	d := s.take()[0]
	require.Len(t, d, AckHeaderBytes+HeaderBytes)
	require.Equal(t, []byte{0, 0, 0, 0, 0, 1, 0, 0, 0}, d[AckHeaderBytes:])
}

// TestGiveUp: a peer that keeps sending but never acknowledges is given
// up on once a fragment was resent 5 times and the peer was still heard
// AckTimeout after it was first sent; a peer that sends nothing at this
// layer (a quiet Cute Framework peer cannot acknowledge) is not.
func TestGiveUp(t *testing.T) {
	for _, talking := range []bool{true, false} {
		s := newSide(t, Config{AckTimeout: time.Second}, 0)
		peer := newSide(t, Config{PiggybackOnly: true}, 0)
		require.NoError(t, s.t.Send([]byte{1}, true))
		var err error
		for ; err == nil && s.now < 5; s.now += 1.0 / 16 {
			if talking {
				// The peer's datagrams arrive; what it would ack never reaches it.
				require.NoError(t, peer.t.Send([]byte{2}, false))
				for _, d := range peer.take() {
					require.NoError(t, s.t.Receive(d))
				}
			}
			err = s.t.Update(at(s.now))
			s.take()
		}
		if !talking {
			require.NoError(t, err)
			require.Equal(t, 1, s.t.Unacked(), "still resending")
			continue
		}
		require.ErrorIs(t, err, ErrAckTimeout)
		require.InDelta(t, 1.0, s.now, 0.2)
	}
}

// TestLossyExchange is the target: a 5,000-byte reliable message
// each way under 20% loss, delivered once and in order, with a
// fire-and-forget message each way every step that is never resent.
func TestLossyExchange(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 31))
	lose := func() bool { return rng.IntN(5) == 0 }
	p := newPair(t, liveConfig)
	big := [2][]byte{tagged(1, 5000), tagged(2, 5000)}
	require.NoError(t, p.a.t.Send(big[0], true))
	require.NoError(t, p.b.t.Send(big[1], true))
	require.NoError(t, p.a.t.Send(tagged(5, 10), true))
	var got [2][][]byte
	fafSent := 0
	for step := range 200 {
		for _, s := range []*side{p.a, p.b} {
			require.NoError(t, s.t.Send(tagged(step, 30), false))
			fafSent++
		}
		p.step(t, 1.0/60, lose)
		for i, s := range []*side{p.b, p.a} {
			rel, _ := s.popAll()
			got[i] = append(got[i], rel...)
		}
	}
	require.Equal(t, [][]byte{big[0], tagged(5, 10)}, got[0], "once, in order")
	require.Equal(t, [][]byte{big[1]}, got[1])
	for _, s := range []*side{p.a, p.b} {
		require.Zero(t, s.t.Unacked())
	}
	// Every resend was of a reliable fragment: fire-and-forget datagrams
	// counted once each.
	sent := p.a.t.a.counters[PacketsSent] + p.b.t.a.counters[PacketsSent]
	resent := p.a.t.Stats().Resent + p.b.t.Stats().Resent
	acksOnly := p.a.t.Stats().AckOnly + p.b.t.Stats().AckOnly
	require.Equal(t, uint64(fafSent)+5+5+1+resent+acksOnly, sent)
}

// TestMemoryPerConnection measures a Transport's fixed memory (the ack
// system's and the reassembly's 1024-entry windows, the in-flight array):
// what a connection costs before it holds any message. What it may hold
// beyond is bounded by Config: MaxBufferedBytes + MaxMessageBytes
// received (TestMemoryBound), MaxSendQueueBytes queued and 32 fragments
// in flight sent.
func TestMemoryPerConnection(t *testing.T) {
	const n = 200
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	keep := make([]*Transport, n)
	for i := range keep {
		tr, err := New(epoch, Config{}, func([]byte) {})
		require.NoError(t, err)
		keep[i] = tr
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (after.HeapAlloc - before.HeapAlloc) / n
	t.Logf("%d bytes per connection, before any message", per)
	require.Less(t, per, uint64(80<<10))
	runtime.KeepAlive(keep)
}

// TestNextDue: Update is due at once when queued fragments can go out, or
// will once acks just taken free the window (a transfer paced by the
// resend timer instead moves 32 fragments per 100 ms), and when a quarter
// of a window of reliable fragments is owed an ack; else at the next
// resend or ack delay; and never when idle.
func TestNextDue(t *testing.T) {
	p := newPair(t, liveConfig)
	require.True(t, p.a.t.NextDue().IsZero(), "idle")
	require.NoError(t, p.a.t.Send(make([]byte, 40*FragmentBytes), true))
	require.Equal(t, at(0), p.a.t.NextDue(), "queued fragments to send")
	p.a.now += 0.001
	require.NoError(t, p.a.t.Update(at(p.a.now)))
	require.Equal(t, MaxInFlight, p.a.t.Unacked())
	resend := p.a.t.NextDue()
	require.InDelta(t, 0.101, resend.Sub(epoch).Seconds(), 0.001, "the window is full: the next resend")
	for i, d := range p.a.take() {
		require.NoError(t, p.b.t.Receive(d))
		if i+1 < ackEvery {
			require.Equal(t, at(0).Add(DefaultAckDelay).Add(time.Nanosecond), p.b.t.NextDue(), "the ack delay")
		}
	}
	require.Equal(t, at(0), p.b.t.NextDue(), "a quarter window owed: at once")
	require.NoError(t, p.b.t.Update(at(0)))
	acks := p.b.take()
	require.Len(t, acks, 1)
	require.NoError(t, p.a.t.Receive(acks[0]))
	require.Equal(t, at(p.a.now), p.a.t.NextDue(), "acks taken free the window: at once")
}
