package wire

import (
	"testing"

	"github.com/gonetcode/netcode/internal/testing/race"
)

// TestPacketAlloc checks that writing and reading a payload packet
// allocates nothing.
func TestPacketAlloc(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector changes what escapes to the heap (a stack IV passed to crypto/rand does); .ci/run runs this test without -race")
	}
	pk := packetKey(make([]byte, KeyBytes))
	var iv IV
	payload := make([]byte, MaxPayloadBytes)
	buf := make([]byte, 0, MaxPacketBytes)
	var r Replay
	var p Packet
	seq := uint64(0)
	allocs := testing.AllocsPerRun(100, func() {
		seq++
		b := AppendPayload(buf[:0], seq, pk, &iv, payload)
		if Open(b, pk, &r, &p) != nil {
			t.Fatal("open failed")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per payload packet, want 0", allocs)
	}
}

func BenchmarkPayloadRoundTrip(b *testing.B) {
	pk := packetKey(make([]byte, KeyBytes))
	var iv IV
	payload := make([]byte, 100)
	buf := make([]byte, 0, MaxPacketBytes)
	var r Replay
	var p Packet
	b.ReportAllocs()
	for i := uint64(0); b.Loop(); i++ {
		pkt := AppendPayload(buf[:0], i, pk, &iv, payload)
		if Open(pkt, pk, &r, &p) != nil {
			b.Fatal("open failed")
		}
	}
}
