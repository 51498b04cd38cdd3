package core

import (
	"net/netip"
	"testing"
	"time"

	"github.com/gonetcode/netcode/cute/internal/wire"
)

// checkServer verifies the server's tables agree with each other and
// with its bounds.
func checkServer(t *testing.T, s *Server) {
	t.Helper()
	n := 0
	for i := range s.slots {
		c := &s.slots[i]
		if !c.connected {
			continue
		}
		n++
		if j, ok := s.byAddr[c.addr]; !ok || j != i {
			t.Fatalf("slot %d: address map says %d, %v", i, j, ok)
		}
		if j, ok := s.byID[c.clientID]; !ok || j != i {
			t.Fatalf("slot %d: id map says %d, %v", i, j, ok)
		}
	}
	if n != s.count || len(s.byAddr) != n || len(s.byID) != n {
		t.Fatalf("count %d, slots %d, maps %d %d", s.count, n, len(s.byAddr), len(s.byID))
	}
	if len(s.pend) > s.cfg.MaxPending || len(s.pendAddr) != len(s.pend) {
		t.Fatalf("pending %d (max %d), map %d", len(s.pend), s.cfg.MaxPending, len(s.pendAddr))
	}
	for i, p := range s.pend {
		if s.pendAddr[p.addr] != i {
			t.Fatalf("pending %d misfiled", i)
		}
		if _, ok := s.byAddr[p.addr]; ok {
			t.Fatalf("pending %v is also connected", p.addr)
		}
	}
}

// FuzzServerStream drives a server and three clients with a stream of
// operations decided by the fuzzer: time steps, deliveries of captured
// datagrams (as sent, mutated, relabelled, truncated, to the wrong end or
// from another address), raw datagrams, sends and disconnects on both
// sides. After every operation the server's tables must agree, its
// bounds hold, and no datagram from an address without a connection may
// be answered with more bytes than it carried.
func FuzzServerStream(f *testing.F) {
	f.Add([]byte{0, 10, 0, 10, 0, 10, 0, 10, 3, 0, 50, 4, 0, 7, 0, 10, 1, 2, 3, 4})
	f.Add([]byte{0, 1, 1, 0, 0, 1, 0, 1, 2, 5, 0, 200, 7, 1, 2, 3})
	f.Add([]byte{6, 0, 0, 40, 5, 1, 0, 255, 1, 3, 9, 8, 0, 30})
	f.Fuzz(func(t *testing.T, ops []byte) {
		s, _ := newServer(t, func(c *ServerConfig) { c.MaxClients = 2; c.MaxPending = 3 })
		n := newNet(t, s)
		addrs := []netip.AddrPort{
			netip.MustParseAddrPort("10.0.0.2:1000"),
			netip.MustParseAddrPort("10.0.0.3:1000"),
			netip.MustParseAddrPort("[fd00::4]:1000"),
			attacker,
		}
		tokens := make([][]byte, 3)
		for i := range 3 {
			tokens[i] = makeToken(t, tokenOpts{clientID: uint64(i + 1), handshake: 1, expire: 3})
			n.add(addrs[i], tokens[i])
		}
		var captured [][]byte
		for _, d := range n.sent {
			captured = append(captured, d...)
		}
		arg := func(i int) byte {
			if i < len(ops) {
				return ops[i]
			}
			return 0
		}
		for i := 0; i < len(ops); i += 3 {
			a, b := arg(i+1), arg(i+2)
			switch ops[i] % 8 {
			case 0:
				n.step(time.Duration(a) * 10 * time.Millisecond)
				for _, d := range n.sent {
					captured = append(captured, d...)
				}
				if len(captured) > 64 {
					captured = captured[len(captured)-64:]
				}
			case 1, 2:
				if len(captured) == 0 {
					continue
				}
				d := append([]byte(nil), captured[int(a)%len(captured)]...)
				switch b % 5 {
				case 1:
					d[int(b)%len(d)] ^= a | 1
				case 2:
					d[0] = b % 9
				case 3:
					d = d[:int(b)%len(d)]
				}
				from := addrs[int(b)%len(addrs)]
				if ops[i]%8 == 1 {
					before := s.ClientCount()
					_, connected := s.byAddr[from]
					var out ServerOutput
					s.Receive(n.now, from, d, &out)
					sent := 0
					for _, m := range out.Datagrams {
						sent += len(m.Buf)
						if len(m.Buf) > wire.MaxPacketBytes {
							t.Fatalf("a %d-byte datagram", len(m.Buf))
						}
					}
					if !connected && sent > len(d) {
						t.Fatalf("answered %d bytes from %v with %d", len(d), from, sent)
					}
					if s.ClientCount() > before+1 {
						t.Fatal("two connections from one datagram")
					}
				} else if c := n.clients[addrs[int(a)%3]]; c != nil {
					var out ClientOutput
					c.Receive(n.now, testServer, d, &out)
				}
			case 3:
				if c := n.clients[addrs[int(a)%3]]; c != nil {
					var out ClientOutput
					_ = c.Send(n.now, make([]byte, int(b)*5), &out)
					n.deliver(addrs[int(a)%3], out.datagrams)
				}
			case 4:
				var out ServerOutput
				_ = s.Send(n.now, int(a)%3, make([]byte, int(b)*5), &out)
				n.deliver(testServer, out.datagrams)
			case 5:
				if c := n.clients[addrs[int(a)%3]]; c != nil {
					var out ClientOutput
					c.Disconnect(n.now, &out)
					n.deliver(addrs[int(a)%3], out.datagrams)
				}
			case 6:
				var out ServerOutput
				_ = s.Disconnect(n.now, int(a)%3, b%2 == 0, &out)
				n.deliver(testServer, out.datagrams)
			case 7:
				raw := ops[i:min(len(ops), i+int(a))]
				var out ServerOutput
				s.Receive(n.now, addrs[int(b)%len(addrs)], append([]byte(nil), raw...), &out)
			}
			checkServer(t, s)
		}
	})
}

// FuzzClientReceive feeds a connecting client arbitrary datagrams from its
// server between updates: it never panics, never leaves a final state, and
// everything it sends is a packet the server's reader accepts the size of.
func FuzzClientReceive(f *testing.F) {
	f.Add([]byte{5, 0, 0, 0, 0, 0, 0, 0, 0}, uint8(3))
	f.Add(make([]byte, wire.ChallengeBytes), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, steps uint8) {
		c, err := NewClient(t0, makeToken(t, tokenOpts{clientID: 1}), testApp)
		if err != nil {
			t.Fatal(err)
		}
		var out ClientOutput
		now := t0
		final := false
		for range int(steps%16) + 1 {
			now = now.Add(30 * time.Millisecond)
			c.Receive(now, testServer, append([]byte(nil), data...), &out)
			c.Update(now, &out)
			if final && out.To > Disconnected {
				t.Fatalf("left a final state for %s", out.To)
			}
			final = out.To <= Disconnected
			for _, m := range out.Datagrams {
				if m.Addr != testServer {
					t.Fatalf("sent to %v", m.Addr)
				}
				switch len(m.Buf) {
				case wire.TokenPacketBytes, wire.ChallengeBytes, wire.EmptyBytes:
				default:
					t.Fatalf("sent a %d-byte datagram", len(m.Buf))
				}
			}
		}
	})
}
