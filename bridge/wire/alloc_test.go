package wire_test

import (
	"context"
	"io"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"

	"github.com/gonetcode/netcode/bridge/wire"
	"github.com/gonetcode/netcode/internal/testing/race"
)

// TestWireAllocs: a datagram carried both ways over WebSocket (browser to
// target and the target's echo back) allocates nothing in steady state, in
// the wire or anywhere else in the process (the client and the target
// included).
func TestWireAllocs(t *testing.T) {
	race.Skip(t)
	tg := newTarget(t, "udp4", true)
	h := newWire(t, wire.Config{Allow: []wire.Range{allow(tg.addr)}, MaxDatagramsPerSecond: -1})
	ws := dial(t, portURL(serveWire(t, h, "tcp4"), tg.addr.Port()))
	ctx := context.Background() // no deadline: coder/websocket would arm a timer per call
	msg := make([]byte, 100)
	buf := make([]byte, 1500)
	roundTrip := func() {
		if err := ws.Write(ctx, websocket.MessageBinary, msg); err != nil {
			t.Fatal(err)
		}
		_, r, err := ws.Reader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(r, buf[:len(msg)]); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Read(buf); err != io.EOF {
			t.Fatal(err)
		}
	}
	for range 100 {
		roundTrip() // warm up
	}
	assert.Zero(t, testing.AllocsPerRun(1000, roundTrip), "allocations per datagram, both ways")
}
