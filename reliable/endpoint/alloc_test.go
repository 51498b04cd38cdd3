package reliable

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEndpointAllocs shows that sending, receiving (fragments included),
// acking and updating allocate nothing once every reassembly slot has
// been used.
func TestEndpointAllocs(t *testing.T) {
	var a, b *Endpoint
	var inA, inB [][]byte // packets in flight to each, reusing buffers
	var nA, nB int
	push := func(q *[][]byte, n *int, p []byte) {
		if *n == len(*q) {
			*q = append(*q, make([]byte, 0, 2048))
		}
		(*q)[*n] = append((*q)[*n][:0], p...)
		*n++
	}
	var err error
	a, err = NewEndpoint(EndpointConfig{Transmit: func(_ uint16, p []byte) { push(&inB, &nB, p) }}, 0)
	require.NoError(t, err)
	b, err = NewEndpoint(EndpointConfig{Transmit: func(_ uint16, p []byte) { push(&inA, &nA, p) }}, 0)
	require.NoError(t, err)
	small, big := make([]byte, 100), make([]byte, 5000)
	now := 0.0
	step := func() {
		now += 0.01
		a.Update(now)
		b.Update(now)
		_ = a.SendPacket(big)
		_ = b.SendPacket(small)
		for i := range nB {
			b.ReceivePacket(inB[i])
		}
		for i := range nA {
			a.ReceivePacket(inA[i])
		}
		nA, nB = 0, 0
		a.ClearAcks()
		b.ClearAcks()
	}
	for range 2 * DefaultEndpointConfig().FragmentReassemblyBufferSize {
		step()
	}
	if n := testing.AllocsPerRun(200, step); n != 0 {
		t.Errorf("%v allocations per step", n)
	}
	require.NotZero(t, a.Counters()[CounterPacketsAcked])
	require.NotZero(t, b.Counters()[CounterFragmentsReceived])
}
