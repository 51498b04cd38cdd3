package reliable

import (
	"encoding/binary"
	"testing"
	"time"

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

// TestCoreAllocs shows that in steady state a reliable message and an
// unreliable one cost no allocation: sending, acking, receiving, reading.
func TestCoreAllocs(t *testing.T) {
	r, err := (&Config{}).resolve(false)
	require.NoError(t, err)
	now := time.Unix(1000, 0)
	var toA, toB wire
	a, err := newCore(r, now, toB.push)
	require.NoError(t, err)
	b, err := newCore(r, now, toA.push)
	require.NoError(t, err)
	msg := make([]byte, 3000)
	umsg := make([]byte, 200)
	out := make([]byte, len(msg))
	var hdr [messageLenBytes]byte
	binary.LittleEndian.PutUint32(hdr[:], uint32(len(msg)))
	steps := 0
	step := func() {
		steps++
		now = now.Add(time.Millisecond)
		a.setTime(now)
		a.chans[0].snd.write(hdr[:], msg)
		a.chans[1].usnd.push(umsg)
		a.flush()
		toB.deliver(b, now)
		rcv := &b.chans[0].rcv
		if rcv.read(hdr[:], true) != len(hdr) || rcv.read(out, true) != len(out) {
			t.Fatal("message not delivered")
		}
		if b.chans[1].urcv.size != 1 {
			t.Fatal("unreliable message not delivered")
		}
		b.chans[1].urcv.pop()
		b.flush()
		toA.deliver(a, now)
		if steps%10 == 0 {
			a.tick(now)
			b.tick(now)
			toB.deliver(b, now)
			toA.deliver(a, now)
		}
	}
	for range 3000 {
		step()
	}
	if n := testing.AllocsPerRun(500, step); n != 0 {
		t.Errorf("%v allocations per message", n)
	}
	require.NoError(t, a.err)
	require.NoError(t, b.err)
}

// FuzzSessionPayload feeds a session arbitrary entries after a valid
// packet header and layout: it may end the connection with an error, but
// never panics, and its receive state stays within its bounds.
func FuzzSessionPayload(f *testing.F) {
	f.Add(uint16(0), []byte{entryChunk, 0, 0, 0, 0, 0, 0, 3, 0, 'a', 'b', 'c'})
	f.Add(uint16(5), []byte{entryMessage, 1, 2, 0, 'h', 'i'})
	f.Add(uint16(9), []byte{entryWindow, 0, 0, 0, 0, 0, 0, 2, 0, 0})
	f.Add(uint16(1), []byte{entryChunk, 0, 1, 0, 0, 0, 0, 0, 0})
	r, err := (&Config{}).resolve(false)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, seq uint16, entries []byte) {
		c, err := newCore(r, time.Unix(0, 0), func([]byte) {})
		if err != nil {
			t.Fatal(err)
		}
		p := make([]byte, MaxPacketHeaderBytes, MaxPacketHeaderBytes+layoutBytes+len(entries))
		p = p[:putPacketHeader(p, seq, seq, 0)]
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
		}
	})
}
