package core

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServerConcurrent drives eight connections from eight goroutines at
// once (a payload each way per round) while another runs Update and a
// third sends to a slot that is disconnected and reconnected: every payload
// arrives, in order per connection, and the race detector sees the locks
// hold. Crypto for different connections runs in parallel.
func TestServerConcurrent(t *testing.T) {
	const clients, rounds = 8, 200
	s, _ := newServer(t, nil)
	n := newNet(t, s)
	addrs := make([]netip.AddrPort, clients)
	cs := make([]*Client, clients)
	for i := range clients {
		addrs[i] = netip.AddrPortFrom(netip.MustParseAddr("10.2.0.1"), uint16(2000+i))
		cs[i] = n.add(addrs[i], makeToken(t, tokenOpts{clientID: uint64(100 + i)}))
	}
	n.run(300*time.Millisecond, dt)
	require.Equal(t, clients, s.ClientCount())
	index := map[netip.AddrPort]int{}
	for _, e := range n.events {
		if e.Kind == EventConnected {
			index[e.Addr] = e.Index
		}
	}
	base := n.now

	var wg sync.WaitGroup
	var toServer, toClients atomic.Int64
	for k := range clients {
		wg.Go(func() {
			var cout ClientOutput
			var sout ServerOutput
			buf := make([]byte, 1500)
			last := uint64(0)
			for r := range rounds {
				now := base.Add(time.Duration(r) * time.Millisecond)
				payload := []byte{byte(k), byte(r)}
				if cs[k].Send(now, payload, &cout) != nil {
					t.Error("client send")
					return
				}
				s.Receive(now, addrs[k], buf[:copy(buf, cout.Datagrams[0].Buf)], &sout)
				for _, e := range sout.Events {
					if e.Kind == EventPayload && e.Payload[0] == byte(k) && e.Payload[1] == byte(r) {
						toServer.Add(1)
					}
				}
				if s.Send(now, index[addrs[k]], payload, &sout) != nil {
					t.Error("server send")
					return
				}
				for _, m := range sout.Datagrams {
					cs[k].Receive(now, testServer, buf[:copy(buf, m.Buf)], &cout)
					if cout.Payload != nil {
						if cout.Sequence <= last {
							t.Error("out of order")
						}
						last = cout.Sequence
						toClients.Add(1)
					}
				}
			}
		})
	}
	wg.Go(func() {
		var out ServerOutput
		for r := range rounds {
			s.Update(base.Add(time.Duration(r)*time.Millisecond), &out)
			_ = s.ClientCount()
			_ = s.Stats()
		}
	})
	wg.Wait()
	assert.Equal(t, int64(clients*rounds), toServer.Load())
	assert.Equal(t, int64(clients*rounds), toClients.Load())
	assert.Equal(t, clients, s.ClientCount())

	// A send racing a disconnect of the same slot either goes out before
	// it or fails with ErrNoClient; never to a reused slot's new client.
	slot := index[addrs[0]]
	var sendErr error
	wg.Go(func() {
		var out ServerOutput
		sendErr = s.Send(base, slot, []byte("x"), &out)
	})
	wg.Go(func() {
		var out ServerOutput
		_ = s.Disconnect(base, slot, true, &out)
	})
	wg.Wait()
	if sendErr != nil {
		assert.ErrorIs(t, sendErr, ErrNoClient)
	}
	assert.Equal(t, clients-1, s.ClientCount())
}
