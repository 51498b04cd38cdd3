package layer

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/reliable/endpoint"
)

// wire holds datagrams in flight to one side in reused buffers.
type wire struct {
	bufs [][]byte
	n    int
}

func (w *wire) push(b []byte) {
	if w.n == len(w.bufs) {
		w.bufs = append(w.bufs, make([]byte, 0, MaxDatagram))
	}
	w.bufs[w.n] = append(w.bufs[w.n][:0], b...)
	w.n++
}

// allocPair is two Transports whose datagrams go through wires, and one
// exchange: a message each way of size bytes, delivered and read.
type allocPair struct {
	a, b     *Transport
	toA, toB wire
	now      time.Time
	msg, out []byte
	reliable bool
}

func newAllocPair(tb testing.TB, size int, reliable bool) *allocPair {
	p := &allocPair{now: epoch, msg: make([]byte, size), out: make([]byte, size), reliable: reliable}
	var err error
	p.a, err = New(epoch, Config{}, p.toB.push)
	require.NoError(tb, err)
	p.b, err = New(epoch, Config{}, p.toA.push)
	require.NoError(tb, err)
	return p
}

func (p *allocPair) exchange() {
	p.now = p.now.Add(time.Second / 60)
	_ = p.a.Send(p.msg, p.reliable)
	_ = p.b.Send(p.msg, p.reliable)
	_ = p.a.Update(p.now)
	_ = p.b.Update(p.now)
	for i := range p.toB.n {
		_ = p.b.Receive(p.toB.bufs[i])
	}
	for i := range p.toA.n {
		_ = p.a.Receive(p.toA.bufs[i])
	}
	p.toA.n, p.toB.n = 0, 0
	for _, t := range []*Transport{p.a, p.b} {
		for {
			m, _, ok := t.Peek()
			if !ok {
				break
			}
			copy(p.out, m)
			t.Pop()
		}
	}
}

// TestAllocSteadyState shows that a connection in steady state allocates
// nothing per message of up to one fragment, reliable or fire-and-forget:
// send, fragments, acks, resends, reassembly, delivery and read.
func TestAllocSteadyState(t *testing.T) {
	for _, size := range []int{1, 100, FragmentBytes} {
		for _, reliable := range []bool{true, false} {
			t.Run(fmt.Sprintf("%d/reliable=%v", size, reliable), func(t *testing.T) {
				p := newAllocPair(t, size, reliable)
				for range 200 {
					p.exchange()
				}
				if n := testing.AllocsPerRun(500, p.exchange); n != 0 {
					t.Errorf("%v allocations per exchange", n)
				}
				require.LessOrEqual(t, p.a.Unacked()+p.b.Unacked(), 4, "acks keep up")
			})
		}
	}
}

// BenchmarkMessage measures the layer's CPU per message (a message each
// way, delivered and read, acks included), beside package reliable's
// endpoint doing the same job (fragmenting, acking, reassembling) for
// the same sizes, in one run.
func BenchmarkMessage(b *testing.B) {
	for _, size := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("cute/%d", size), func(b *testing.B) {
			p := newAllocPair(b, size, true)
			b.ReportAllocs()
			b.SetBytes(int64(2 * size))
			for b.Loop() {
				p.exchange()
			}
		})
		b.Run(fmt.Sprintf("reliable/%d", size), func(b *testing.B) {
			var toA, toB wire
			out := make([]byte, size)
			deliver := func(_ uint16, m []byte) bool { copy(out, m); return true }
			ea, err := endpoint.New(endpoint.Config{Transmit: func(_ uint16, p []byte) { toB.push(p) }, Process: deliver}, 0)
			require.NoError(b, err)
			eb, err := endpoint.New(endpoint.Config{Transmit: func(_ uint16, p []byte) { toA.push(p) }, Process: deliver}, 0)
			require.NoError(b, err)
			msg := make([]byte, size)
			now := 0.0
			b.ReportAllocs()
			b.SetBytes(int64(2 * size))
			for b.Loop() {
				now += 1.0 / 60
				ea.Update(now)
				eb.Update(now)
				_ = ea.SendPacket(msg)
				_ = eb.SendPacket(msg)
				for i := range toB.n {
					eb.ReceivePacket(toB.bufs[i])
				}
				for i := range toA.n {
					ea.ReceivePacket(toA.bufs[i])
				}
				toA.n, toB.n = 0, 0
				ea.ClearAcks()
				eb.ClearAcks()
			}
		})
	}
}

// BenchmarkSendUpdate measures one reliable Send of 100 bytes and the
// Update that hands its fragment out at once, as package cute's Conn does
// for each reliable message, at steady state: the clock advances a
// microsecond per message, the peer takes each datagram and acks every
// ackEvery fragments with an ack-only datagram, so about a window of
// fragments is in flight. Its cost must not grow with the ack window.
func BenchmarkSendUpdate(b *testing.B) {
	var toA, toB wire
	now := epoch
	sender, err := New(now, Config{}, toB.push)
	require.NoError(b, err)
	peer, err := New(now, Config{}, toA.push)
	require.NoError(b, err)
	msg := make([]byte, 100)
	step := func() {
		now = now.Add(time.Microsecond)
		_ = sender.Send(msg, true)
		_ = sender.Update(now)
		for i := range toB.n {
			_ = peer.Receive(toB.bufs[i])
		}
		toB.n = 0
		for {
			if _, _, ok := peer.Peek(); !ok {
				break
			}
			peer.Pop()
		}
		_ = peer.Update(now)
		for i := range toA.n {
			_ = sender.Receive(toA.bufs[i])
		}
		toA.n = 0
	}
	for range 4 * ackBuffer {
		step()
	}
	b.ReportAllocs()
	for b.Loop() {
		step()
	}
	require.LessOrEqual(b, sender.Unacked(), MaxInFlight)
}
