package reliable

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wire is an in-memory link between two cores in a test: datagrams queue
// in reused buffers until delivered.
type wire struct {
	q [][]byte
	n int
}

func (w *wire) push(p []byte) {
	if w.n == len(w.q) {
		w.q = append(w.q, make([]byte, 0, 2048))
	}
	w.q[w.n] = append(w.q[w.n][:0], p...)
	w.n++
}

func (w *wire) deliver(c *core, now time.Time) {
	for i := range w.n {
		c.receive(now, w.q[i])
	}
	w.n = 0
}

// coreLink joins two cores in memory, each with the default channels
// (0 reliable-ordered, 1 unreliable), to pass messages without I/O.
type coreLink struct {
	a, b      *core
	toA, toB  wire
	now       time.Time
	hdr       [messageLenBytes]byte
	msg, umsg []byte
	out       []byte
	steps     int
	tickEvery int
}

func newCoreLink(tb testing.TB, msgBytes, umsgBytes, tickEvery int) *coreLink {
	r, err := (&Config{}).resolve(false)
	require.NoError(tb, err)
	l := &coreLink{now: time.Unix(1000, 0), msg: make([]byte, msgBytes), umsg: make([]byte, umsgBytes), out: make([]byte, msgBytes), tickEvery: tickEvery}
	l.a, err = newCore(r, l.now, l.toB.push)
	require.NoError(tb, err)
	l.b, err = newCore(r, l.now, l.toA.push)
	require.NoError(tb, err)
	binary.LittleEndian.PutUint32(l.hdr[:], uint32(msgBytes))
	return l
}

// step sends one reliable and one unreliable message from a to b, has b
// read them, and lets the acks flow back.
func (l *coreLink) step() bool {
	l.steps++
	l.now = l.now.Add(100 * time.Microsecond)
	a, b := l.a, l.b
	a.setTime(l.now)
	a.chans[0].snd.write(l.hdr[:], l.msg)
	a.chans[1].usnd.push(l.umsg)
	a.flush()
	l.toB.deliver(b, l.now)
	rcv := &b.chans[0].rcv
	if rcv.read(l.hdr[:], true) != len(l.hdr) || rcv.read(l.out, true) != len(l.out) || b.chans[1].urcv.size != 1 {
		return false
	}
	b.chans[1].urcv.pop()
	b.flush()
	l.toA.deliver(a, l.now)
	if l.steps%l.tickEvery == 0 {
		a.tick(l.now)
		b.tick(l.now)
		l.toB.deliver(b, l.now)
		l.toA.deliver(a, l.now)
	}
	return true
}

// TestCoreAllocs shows that in steady state a reliable message and an
// unreliable one cost no allocation: sending, acking, receiving, reading.
func TestCoreAllocs(t *testing.T) {
	l := newCoreLink(t, 3000, 200, 10)
	step := func() {
		if !l.step() {
			t.Fatal("message not delivered")
		}
	}
	for range 3000 {
		step()
	}
	if n := testing.AllocsPerRun(500, step); n != 0 {
		t.Errorf("%v allocations per message", n)
	}
	require.NoError(t, l.a.err)
	require.NoError(t, l.b.err)
}

// FuzzSessionPayload feeds a session arbitrary entries after a valid
// packet header and layout: it may end the connection with an error, but
// never panics, and its receive state stays within its bounds; odd
// sequences use a Stream's layout, whose window auto-tunes after each read.
func FuzzSessionPayload(f *testing.F) {
	f.Add(uint16(0), []byte{entryChunk, 0, 0, 0, 0, 0, 0, 3, 0, 'a', 'b', 'c'})
	f.Add(uint16(5), []byte{entryMessage, 1, 2, 0, 'h', 'i'})
	f.Add(uint16(9), []byte{entryWindow, 0, 0, 0, 0, 0, 0, 2, 0, 0})
	f.Add(uint16(1), []byte{entryChunk, 0, 1, 0, 0, 0, 0, 0, 0})
	r, err := (&Config{}).resolve(false)
	if err != nil {
		f.Fatal(err)
	}
	rs, err := (&Config{}).resolve(true) // a Stream's: its window auto-tunes
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, seq uint16, entries []byte) {
		r := r
		if seq&1 != 0 {
			r = rs
		}
		c, err := newCore(r, time.Unix(0, 0), func([]byte) {})
		if err != nil {
			t.Fatal(err)
		}
		// An Endpoint header: the prefix (a two-byte ack, four ack-bit
		// bytes), the sequence, the ack (itself), no ack bits.
		p := []byte{0x1e, byte(seq), byte(seq >> 8), byte(seq), byte(seq >> 8), 0, 0, 0, 0}
		p = binary.LittleEndian.AppendUint32(p, r.layout)
		p = append(p, entries...)
		for range 2 { // the second time, as a duplicate
			c.receive(time.Unix(1, 0), p)
		}
		for i := range c.chans {
			cs := &c.chans[i]
			if cs.spec.kind == Unreliable {
				if cs.urcv.size > len(cs.urcv.bufs) {
					t.Fatal("unreliable queue over its bound")
				}
				continue
			}
			rcv := &cs.rcv
			if rcv.ready < 0 || rcv.ready > len(rcv.slots)*r.chunkMax || rcv.frontier-rcv.next > uint32(len(rcv.slots)) {
				t.Fatalf("receive state out of bounds: %+v", rcv)
			}
			buf := make([]byte, rcv.ready)
			if n := rcv.read(buf, true); n != len(buf) {
				t.Fatalf("read %d of %d ready bytes", n, len(buf))
			}
			c.readDone(time.Unix(2, 0), rcv)
			if rcv.window > rcv.maxWindow || rcv.held > int(rcv.window) {
				t.Fatalf("receive window past its bound: %+v", rcv)
			}
		}
	})
}

// TestBudgetUnreliableFirst: with a 1 MiB reliable message taking a
// hundred ticks of the budget, an unreliable update sent each tick still
// arrives in the tick it was sent (simulated time, no I/O).
func TestBudgetUnreliableFirst(t *testing.T) {
	const tick = 10 * time.Millisecond
	r, err := (&Config{SendRate: 1 << 20, TickInterval: tick, Channels: []ChannelConfig{
		{Kind: ReliableOrdered, MaxMessageSize: 1 << 20}, {Kind: Unreliable},
	}}).resolve(false)
	require.NoError(t, err)
	now := time.Unix(1000, 0)
	var toA, toB wire
	a, err := newCore(r, now, toB.push)
	require.NoError(t, err)
	b, err := newCore(r, now, toA.push)
	require.NoError(t, err)

	big := selfChecking(0, 1<<20)
	var hdr [messageLenBytes]byte
	binary.LittleEndian.PutUint32(hdr[:], uint32(len(big)))
	a.chans[0].snd.limit = len(big) + len(hdr)
	a.chans[0].snd.write(hdr[:], big)
	got := make([]byte, 0, len(big)+len(hdr))
	buf := make([]byte, 64<<10)
	ticks := 0
	for ; len(got) < cap(got); ticks++ {
		require.Less(t, ticks, 1000, "the reliable message never completed")
		now = now.Add(tick)
		update := selfChecking(ticks+1, 200)
		require.True(t, a.chans[1].usnd.push(update))
		a.tick(now)
		sent := 0
		for i := range toB.n {
			sent += len(toB.q[i])
		}
		assert.LessOrEqual(t, float64(sent), 3*r.rate*tick.Seconds()+float64(r.maxPacket), "tick %d: over the budget", ticks)
		toB.deliver(b, now)
		require.Equal(t, 1, b.chans[1].urcv.size, "tick %d: the update did not arrive at once", ticks)
		i, err := checkMessage(b.chans[1].urcv.peek())
		require.NoError(t, err)
		require.Equal(t, ticks+1, i)
		b.chans[1].urcv.pop()
		n := b.chans[0].rcv.read(buf, true)
		got = append(got, buf[:n]...)
		b.tick(now)
		toA.deliver(a, now)
	}
	assert.Greater(t, ticks, 50, "a 1 MiB message at 1 MiB/s takes many ticks")
	_, err = checkMessage(got[messageLenBytes:])
	require.NoError(t, err)
}

// streamCores returns two stream cores with the defaults, started at now,
// each sending on the wire to the other.
func streamCores(tb testing.TB, now time.Time) (a, b *core, toA, toB *wire) {
	tb.Helper()
	r, err := (&Config{}).resolve(true)
	require.NoError(tb, err)
	toA, toB = new(wire), new(wire)
	a, err = newCore(r, now, toB.push)
	require.NoError(tb, err)
	b, err = newCore(r, now, toA.push)
	require.NoError(tb, err)
	return a, b, toA, toB
}

// TestIdleIsSilent: a quiet connection keeps sending its acks and windows
// for a while after the last data, then nothing (simulated time).
func TestIdleIsSilent(t *testing.T) {
	now := time.Unix(1000, 0)
	a, b, toA, toB := streamCores(t, now)
	a.hello()
	b.hello()
	a.chans[0].snd.write([]byte("hello"))
	a.flush()
	sent := map[bool]int{} // by "after idleActive"
	for ms := 0; ms < 5000; ms += 10 {
		now = now.Add(10 * time.Millisecond)
		a.tick(now)
		b.tick(now)
		sent[ms > int(idleActive/time.Millisecond)+100] += toA.n + toB.n
		toB.deliver(b, now)
		toA.deliver(a, now)
	}
	assert.Positive(t, sent[false], "acks and windows while active")
	assert.Zero(t, sent[true], "packets long after the last data")
	assert.Equal(t, 5, b.chans[0].rcv.ready)
}

// TestProtocolViolations: a payload that breaks the channel protocol ends
// the connection with ErrProtocol (or ErrConfigMismatch), changes no
// channel, and is not acked.
func TestProtocolViolations(t *testing.T) {
	r, err := (&Config{}).resolve(false) // 0 reliable, 1 unreliable
	require.NoError(t, err)
	u32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	tests := []struct {
		name    string
		payload []byte
		want    error
	}{
		{"shorter than the layout", []byte{1, 2}, ErrProtocol},
		{"other layout", u32(r.layout + 1), ErrConfigMismatch},
		{"unknown channel", cat(u32(r.layout), []byte{entryMessage, 7, 1, 0, 'x'}), ErrProtocol},
		{"unknown entry", cat(u32(r.layout), []byte{9, 0}), ErrProtocol},
		{"chunk on the unreliable channel", cat(u32(r.layout), []byte{entryChunk, 1, 0}, u32(0), []byte{1, 0, 'x'}), ErrProtocol},
		{"message on the reliable channel", cat(u32(r.layout), []byte{entryMessage, 0, 1, 0, 'x'}), ErrProtocol},
		{"short chunk", cat(u32(r.layout), []byte{entryChunk, 0, 0, 0}), ErrProtocol},
		{"chunk longer than the packet", cat(u32(r.layout), []byte{entryChunk, 0, 0}, u32(0), []byte{9, 0, 'x'}), ErrProtocol},
		{"chunk over the maximum", cat(u32(r.layout), []byte{entryChunk, 0, 0}, u32(0), []byte{0xff, 0xff}), ErrProtocol},
		{"unknown chunk flag", cat(u32(r.layout), []byte{entryChunk, 0, 4}, u32(0), []byte{1, 0, 'x'}), ErrProtocol},
		{"short message", cat(u32(r.layout), []byte{entryMessage, 1, 1}), ErrProtocol},
		{"message over the maximum", cat(u32(r.layout), []byte{entryMessage, 1, 0xff, 0xff}), ErrProtocol},
		{"short window", cat(u32(r.layout), []byte{entryWindow, 0, 1, 2}), ErrProtocol},
		{"ack of data never sent", cat(u32(r.layout), []byte{entryWindow, 0}, u32(5), u32(100)), ErrProtocol},
		{"a valid entry then garbage", cat(u32(r.layout), []byte{entryMessage, 1, 1, 0, 'x', 0}), ErrProtocol},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := newCore(r, time.Unix(0, 0), func([]byte) {})
			require.NoError(t, err)
			assert.False(t, c.process(0, tc.payload))
			assert.ErrorIs(t, c.err, tc.want)
			assert.Zero(t, c.chans[1].urcv.size, "a bad packet delivered a message")
			assert.Zero(t, c.recvSinceSend)
		})
	}
	// Data beyond the receive window is not an error, but not acked.
	c, err := newCore(r, time.Unix(0, 0), func([]byte) {})
	require.NoError(t, err)
	assert.False(t, c.process(0, cat(u32(r.layout), []byte{entryChunk, 0, 0}, u32(uint32(r.chans[0].window)), []byte{1, 0, 'x'})))
	assert.NoError(t, c.err)
}

func TestConfigNames(t *testing.T) {
	assert.Equal(t, "reliable-ordered", ReliableOrdered.String())
	assert.Equal(t, "unreliable", Unreliable.String())
	assert.Equal(t, "stream", kindStream.String())
	assert.Equal(t, "ChannelKind(9)", ChannelKind(9).String())
}

// TestSendQueueRing writes and cuts a byte stream through a send queue in
// pieces of sizes that make its ring wrap and grow at every offset, and
// checks the bytes come out as they went in, with the queue's bound.
func TestSendQueueRing(t *testing.T) {
	for _, tc := range []struct{ write, take int }{{1, 1}, {7, 5}, {1000, 1168}, {5000, 1168}, {70000, 333}} {
		s := relSend{limit: 64 << 10}
		src := make([]byte, 300<<10)
		pattern(src, tc.write)
		var got []byte
		in := 0
		for len(got) < len(src) {
			if k := min(s.room(), tc.write, len(src)-in); k > 0 {
				s.write(src[in : in+k])
				in += k
			}
			if len(s.queue) > s.limit {
				t.Fatalf("the ring outgrew its bound: %d bytes", len(s.queue))
			}
			out := make([]byte, min(s.queued(), tc.take))
			s.take(out)
			got = append(got, out...)
		}
		require.Equal(t, src, got, "write %d, take %d", tc.write, tc.take)
		require.Zero(t, s.queued())
	}
}
