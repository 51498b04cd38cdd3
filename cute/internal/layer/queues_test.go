package layer

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/internal/testing/vectortest"
)

// standardStep is the vectors' standard step: B sends a 1-byte
// fire-and-forget ack carrier, A and B update, every datagram is
// delivered in emission order, and B's receive errors are counted.
func standardStep(t *testing.T, a, b *side, errs map[error]int) {
	t.Helper()
	require.NoError(t, b.t.Send([]byte{0xdb}, false))
	for _, s := range []*side{a, b} {
		s.now += 1.0 / 16
		require.NoError(t, s.t.Update(at(s.now)))
	}
	for _, d := range a.take() {
		if err := b.t.Receive(d); err != nil {
			errs[err]++
		}
	}
	for _, d := range b.take() {
		_ = a.t.Receive(d)
	}
}

// drain pops everything s holds and returns the reliable messages.
func drain(s *side) [][]byte {
	rel, _ := s.popAll()
	return rel
}

// TestQueueVectors replays send_errors, receive_queue_full and
// reliable_sequence_wrap of transport.json.
func TestQueueVectors(t *testing.T) {
	var v transportVectors
	require.NoError(t, vectortest.LoadCute(vectorPath("transport.json"), &v))

	t.Run("size_limits", func(t *testing.T) {
		// Negative sizes cannot be expressed in Go; 20971521 bytes is over
		// every MaxMessageBytes.
		s := newSide(t, replayConfig, 0)
		big := make([]byte, 20971521)
		require.ErrorIs(t, s.t.Send(big, true), ErrTooLarge)
		require.ErrorIs(t, s.t.Send(big, false), ErrTooLarge)
		require.Empty(t, s.take())
	})

	t.Run("send_queue_full", func(t *testing.T) {
		w := v.SendErrors[1]
		require.Equal(t, "send_queue_full", w.Name)
		a, b := newSide(t, replayConfig, 0), newSide(t, replayConfig, 0)
		for i := range w.First {
			require.NoError(t, a.t.Send(tagged(7, 1), true), "message %d", i)
		}
		require.ErrorIs(t, a.t.Send(tagged(7, 1), true), ErrSendQueueFull)
		require.Equal(t, QueueEntries, a.t.Queued())
		datagrams, delivered := 0, 0
		errs := map[error]int{}
		for step := 1; ; step++ {
			standardStep(t, a, b, errs)
			datagrams = int(a.t.a.counters[PacketsSent] + b.t.a.counters[PacketsSent])
			delivered += len(drain(b))
			if a.t.Unacked() == 0 && a.t.Queued() == 0 {
				require.Equal(t, w.StepsUntilAcked, step)
				break
			}
			require.Less(t, step, 1000)
		}
		require.Equal(t, w.Delivered, delivered)
		require.Equal(t, w.DatagramsTotal, datagrams)
		require.Equal(t, w.SequenceAfter, a.t.relSend)
	})

	t.Run("receive_queue_full/fire_and_forget", func(t *testing.T) {
		w := v.ReceiveQueueFull[0]
		a, b := newSide(t, replayConfig, 0), newSide(t, replayConfig, 0)
		errs := 0
		for i := range w.SentOK {
			require.NoError(t, a.t.Send([]byte{byte(i)}, false))
			for _, d := range a.take() {
				if err := b.t.Receive(d); err != nil {
					require.ErrorIs(t, err, ErrDropped)
					errs++
				}
			}
		}
		require.Equal(t, w.Errors["Packet dropped. The other end is sending too many packets."], errs)
		_, faf := b.popAll()
		require.Len(t, faf, w.PoppedEnd)
		for i, m := range faf {
			require.Equal(t, []byte{byte(i)}, m, "in order")
		}
		require.NoError(t, a.t.Send([]byte{1}, false))
		for _, d := range a.take() {
			require.NoError(t, b.t.Receive(d))
		}
		_, faf = b.popAll()
		require.Len(t, faf, w.Later)
	})

	t.Run("receive_queue_full/reliable", func(t *testing.T) {
		// cute_net.h loops for ever when the 1025th message completes with
		// the reader's queue full. Go keeps it in reassembly: the call
		// returns, and everything is delivered in order once read.
		require.True(t, v.ReceiveQueueFull[1].Errors == nil)
		a, b := newSide(t, replayConfig, 0), newSide(t, replayConfig, 0)
		errs := map[error]int{}
		sent := 0
		for step := 0; sent < 1030 || a.t.Unacked()+a.t.Queued() > 0; step++ {
			for ; sent < 1030 && a.t.Queued() < 32; sent++ {
				require.NoError(t, a.t.Send([]byte{byte(sent), byte(sent >> 8)}, true))
			}
			standardStep(t, a, b, errs)
			require.Less(t, step, 200)
		}
		require.Equal(t, QueueEntries, b.t.rel.ready.n)
		require.Zero(t, a.t.Unacked()+a.t.Queued(), "all acknowledged: the excess waits complete in reassembly")
		got := drain(b)
		require.Len(t, got, 1030)
		for i, m := range got {
			require.Equal(t, []byte{byte(i), byte(i >> 8)}, m)
		}
	})

	t.Run("reliable_sequence_wrap", func(t *testing.T) {
		w := v.Wrap
		a, b := newSide(t, replayConfig, 0), newSide(t, replayConfig, 0)
		sent, delivered := 0, 0
		errs := map[error]int{}
		for step := 0; delivered < w.Sent; step++ {
			for range 32 {
				// cn_transport_send queues; the driver keeps within the
				// 1024-message queue (16 messages a step get through).
				if sent < w.Sent && a.t.Queued() < QueueEntries {
					require.NoError(t, a.t.Send([]byte{byte(sent), byte(sent >> 8)}, true), "message %d, step %d, queued %d, unacked %d", sent, step, a.t.Queued(), a.t.Unacked())
					sent++
				}
			}
			standardStep(t, a, b, errs)
			for _, m := range drain(b) {
				require.Equal(t, []byte{byte(delivered), byte(delivered >> 8)}, m)
				delivered++
			}
			require.Less(t, step, w.Steps+10)
		}
		require.Equal(t, w.Delivered, delivered)
	})
}
