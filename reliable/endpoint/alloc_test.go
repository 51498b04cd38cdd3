package endpoint

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
	a, err = New(Config{Transmit: func(_ uint16, p []byte) { push(&inB, &nB, p) }}, 0)
	require.NoError(t, err)
	b, err = New(Config{Transmit: func(_ uint16, p []byte) { push(&inA, &nA, p) }}, 0)
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
	for range 2 * defaultConfig().FragmentReassemblyBufferSize {
		step()
	}
	if n := testing.AllocsPerRun(200, step); n != 0 {
		t.Errorf("%v allocations per step", n)
	}
	require.NotZero(t, a.Stats().PacketsAcked)
	require.NotZero(t, b.Stats().FragmentsReceived)
}

// TestConfigErrors shows that New refuses every out-of-range field.
func TestConfigErrors(t *testing.T) {
	for _, bad := range []Config{
		{MaxPacketSize: -1}, {FragmentAbove: -1}, {MaxFragments: 257}, {FragmentSize: -1},
		{AckBufferSize: -1}, {SentPacketsBufferSize: 65537}, {ReceivedPacketsBufferSize: -1},
		{FragmentReassemblyBufferSize: -1}, {RTTHistorySize: -1}, {RTTSmoothingFactor: -1},
		{PacketHeaderSize: -1},
	} {
		_, err := New(bad, 0)
		assert.ErrorIs(t, err, errConfig, "%+v", bad)
	}
}
