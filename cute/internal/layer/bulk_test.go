package layer

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/internal/testing/vectortest"
)

// TestBulkVectors replays the 5 bulk runs of transport.json at the
// largest sizes. The largest messages cute_net.h delivers are delivered
// alike (first datagrams, datagram counts, steps); where its sender
// accepts what its receiver refuses (20 MiB) Go refuses at Send, and a
// fire-and-forget message of 19,065·1100 bytes arrives whole.
func TestBulkVectors(t *testing.T) {
	var v transportVectors
	require.NoError(t, vectortest.LoadCute(vectorPath("transport.json"), &v))
	require.Len(t, v.Bulk, 5)
	for _, b := range v.Bulk {
		t.Run(b.Name, func(t *testing.T) {
			a, r := newSide(t, replayConfig, 0), newSide(t, replayConfig, 0)
			msg := tagged(1, b.Size)
			err := a.t.Send(msg, b.Reliable)
			if b.Size > MaxMessageBytes {
				// cute_net.h's sender takes it; every fragment is then refused
				// by its receiver (and, reliable, acknowledged all the same).
				require.ErrorIs(t, err, ErrTooLarge)
				require.Empty(t, a.take())
				return
			}
			require.NoError(t, err)
			if b.Reliable {
				require.NoError(t, a.t.Send(tagged(2, 3), true))
			}
			var first [][]byte
			datagrams, steps := 0, 0
			var got [][]byte
			errs := map[error]int{}
			// Until delivered and, reliable, acknowledged (A_unacked_fragments_at_end 0).
			for ; len(got) < len(b.Delivered) || b.Reliable && a.t.Unacked() > 0; steps++ {
				if !b.Reliable && steps > 0 {
					break
				}
				if b.Reliable {
					require.NoError(t, r.t.Send([]byte{0xdb}, false))
					for _, s := range []*side{a, r} {
						s.now += 1.0 / 16
						require.NoError(t, s.t.Update(at(s.now)))
					}
				}
				for _, d := range a.take() {
					if len(first) < len(b.First) {
						first = append(first, d)
					}
					datagrams++
					if err := r.t.Receive(d); err != nil {
						errs[err]++
					}
				}
				for _, d := range r.take() {
					_ = a.t.Receive(d)
				}
				rel, faf := r.popAll()
				got = append(append(got, rel...), faf...)
				require.Less(t, steps, 2*max(b.Steps, 1))
			}
			require.Empty(t, errs)
			require.Equal(t, b.Datagrams, datagrams)
			for i, f := range b.First {
				require.Equal(t, []byte(f.Bytes), first[i], "datagram %d", i)
			}
			if b.Name == "fire_and_forget_20971500" {
				// cute_net.h's last fragment is empty and its receiver
				// delivers 20970400 bytes; Go's carries the last 1100.
				require.Equal(t, []int{20970400}, b.Delivered)
				require.Len(t, got, 1)
				require.Equal(t, msg, got[0])
				return
			}
			require.Len(t, got, len(b.Delivered))
			require.Equal(t, msg, got[0])
			if b.Reliable {
				require.Equal(t, tagged(2, 3), got[1])
				require.Equal(t, b.Steps, steps)
				require.Zero(t, a.t.Unacked())
			}
		})
	}
}
