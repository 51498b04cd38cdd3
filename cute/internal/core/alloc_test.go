package core

import (
	"testing"
	"time"

	"github.com/gonetcode/netcode/internal/testing/race"
)

// TestPayloadAlloc: in steady state a payload each way, through both
// cores, and their keepalive updates allocate nothing.
func TestPayloadAlloc(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector changes what escapes to the heap (a stack IV passed to crypto/rand does); .ci/run runs this test without -race")
	}
	s, c, n, addr := connectedPair(t, tokenOpts{clientID: 9})
	payload := make([]byte, 1000)
	var cout ClientOutput
	var sout ServerOutput
	now := n.now
	buf := make([]byte, 1500)
	round := func() {
		now = now.Add(time.Millisecond)
		if c.Send(now, payload, &cout) != nil {
			t.Fatal("client send")
		}
		b := buf[:copy(buf, cout.Datagrams[0].Buf)]
		s.Receive(now, addr, b, &sout)
		if len(sout.Events) != 1 {
			t.Fatal("no payload event")
		}
		if s.Send(now, 0, payload, &sout) != nil {
			t.Fatal("server send")
		}
		b = buf[:copy(buf, sout.Datagrams[0].Buf)]
		c.Receive(now, testServer, b, &cout)
		if cout.Payload == nil {
			t.Fatal("no payload")
		}
		c.Update(now, &cout)
		s.Update(now, &sout)
	}
	for range 10 {
		round()
	}
	if a := testing.AllocsPerRun(200, round); a != 0 {
		t.Errorf("%v allocations per payload round trip, want 0", a)
	}
}

func BenchmarkPayloadRoundTrip(b *testing.B) {
	s, c, n, addr := connectedPair(b, tokenOpts{clientID: 9})
	payload := make([]byte, 100)
	var cout ClientOutput
	var sout ServerOutput
	now := n.now
	buf := make([]byte, 1500)
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		_ = c.Send(now, payload, &cout)
		s.Receive(now, addr, buf[:copy(buf, cout.Datagrams[0].Buf)], &sout)
		_ = s.Send(now, 0, payload, &sout)
		c.Receive(now, testServer, buf[:copy(buf, sout.Datagrams[0].Buf)], &cout)
	}
}
