package layer

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSampleMatchesScan holds the sums header and record keep for update
// to the pass over the sent buffer that cn_ack_system_update makes, after
// every send, receive and update: from the first send (the sample empty,
// then filling), across the 16-bit wrap of the sequence (from 65000, the
// sample spans the wrap from step 1049 to 1560), with datagrams
// lost each way at several rates, acks arriving late and out of order,
// some so late that what they ack is in the sample, and updates that do
// not move the clock.
func TestSampleMatchesScan(t *testing.T) {
	cases := []struct {
		start   uint16  // the sequence the exchange starts at
		loss    float64 // each way
		ackLoss float64 // b's datagrams lost besides the very late ones
		steps   int
	}{
		{0, 0, 0, 1300},
		{0, 0.3, 0.3, 1300},
		{65000, 0, 0, 1800},
		{65000, 0.1, 0.1, 1800},
		{65000, 0.9, 0.9, 1800},
		{65000, 0.2, 1, 1800}, // only the very late arrive
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("from%d/loss%v/%v", c.start, c.loss, c.ackLoss), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(c.start), uint64(c.loss*100)))
			a, b := newAcks(), newAcks()
			for a.sequence != c.start {
				sendAck(a, []byte{0}) // never delivered
			}
			var late [][]byte // b's datagrams held back, delivered out of order
			type held struct {
				at  int
				pkt []byte
			}
			var later []held // b's datagrams that arrive when what they ack is sampled
			check := func(at string) {
				d, n, start, end := a.scan()
				gd, gn, gstart, gend := a.sample()
				require.Equal(t, []any{d, n, start, end}, []any{gd, gn, gstart, gend}, at)
			}
			for i := range c.steps {
				at := fmt.Sprintf("step %d", i)
				pkt, _ := sendAck(a, make([]byte, 1+rng.IntN(100)))
				check(at + " send")
				if rng.Float64() >= c.loss {
					receiveAck(b, pkt)
				}
				back, _ := sendAck(b, []byte{1})
				switch {
				case rng.IntN(50) == 0:
					later = append(later, held{i + ackBuffer/2 + rng.IntN(ackBuffer/2), back})
				case rng.Float64() >= c.ackLoss:
					late = append(late, back)
				}
				for j := 0; j < len(later); j++ {
					if later[j].at <= i {
						receiveAck(a, later[j].pkt)
						later = append(later[:j], later[j+1:]...)
						j--
						check(at + " receive later")
					}
				}
				for len(late) > 0 && rng.IntN(3) > 0 {
					j := rng.IntN(len(late))
					receiveAck(a, late[j])
					late = append(late[:j], late[j+1:]...)
					check(at + " receive")
				}
				dt := []float64{0, 1.0 / 60, 1e-7, rng.Float64() / 10}[rng.IntN(4)]
				a.update(dt)
				a.acked = a.acked[:0]
				check(at + " update")
			}
			require.NotZero(t, a.bytes)
		})
	}
}

// TestSampleBackwards shows that once time has gone backwards, so that
// the sample's send times are out of order and its oldest is not its
// earliest, update takes the sample from the pass itself.
func TestSampleBackwards(t *testing.T) {
	a := newAcks()
	for range 600 {
		sendAck(a, []byte{0})
		a.update(0.01)
	}
	a.update(-10)
	for range 600 {
		sendAck(a, []byte{0})
		a.update(0.01)
	}
	require.True(t, a.backwards)
	d, n, start, end := a.scan()
	oldest := a.sent.find(a.sent.next - ackBuffer).time
	require.Less(t, start, oldest, "the sample's earliest send is not its oldest")
	gd, gn, gstart, gend := a.sample()
	require.Equal(t, []any{d, n, start, end}, []any{gd, gn, gstart, gend})
}
