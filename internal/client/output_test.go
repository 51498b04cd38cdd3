package client

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/testing/tokentest"
	"github.com/gonetcode/netcode/protocol"
	"github.com/gonetcode/netcode/token"
	"github.com/stretchr/testify/require"
)

var srvC = netip.MustParseAddrPort("10.0.0.3:40000")

// scripted is a datagram a test server sends at a fixed time.
type scripted struct {
	at   time.Duration // since epoch
	from netip.AddrPort
	pkt  func(s *serverPackets) []byte
}

// sent is a datagram the client sent, and when.
type sent struct {
	at  time.Duration
	to  netip.AddrPort
	pkt string
}

// runScript runs a client through script until end. With step > 0 it calls
// Update every step, as a ticking adapter would; with step == 0 it calls
// Update only when the last Output's Next has come. It returns what the
// client sent, the states it passed through and when it changed state.
func runScript(t *testing.T, tok []byte, script []scripted, end, step time.Duration) ([]sent, []State, []time.Duration) {
	t.Helper()
	c := New(epoch, tok, nil)
	srv := &serverPackets{key: crypto.NewPacketAEAD(&s2cKey, protocolID)}
	var (
		out      Output
		got      []sent
		states   = []State{c.State()}
		changes  []time.Duration
		next     = c.Next()
		now      time.Duration
		nextRecv = 0
	)
	take := func() {
		if out.Changed() {
			states = append(states, out.To)
			changes = append(changes, now)
		}
		for _, m := range out.Datagrams {
			got = append(got, sent{now, m.Addr, fmt.Sprintf("%x", m.Buf)})
		}
		next = out.Next
		if c.State() > Disconnected {
			require.False(t, next.IsZero(), "no Next in %v", c.State())
		} else {
			require.True(t, next.IsZero(), "a Next in final state %v", c.State())
		}
	}
	for now <= end {
		for nextRecv < len(script) && script[nextRecv].at <= now {
			s := script[nextRecv]
			c.Receive(epoch.Add(now), s.from, s.pkt(srv), &out)
			take()
			nextRecv++
		}
		// Update once per step when ticking, and as often as Next asks at
		// this instant in both modes (a denial to act on is due at once,
		// and then the request to the next server).
		for k := range 3 {
			due := !next.IsZero() && !epoch.Add(now).Before(next)
			if !due && (step == 0 || k > 0) {
				break
			}
			c.Update(epoch.Add(now), &out)
			take()
		}
		if step > 0 {
			now += step
			continue
		}
		// Jump to whatever comes first: the next datagram or Next.
		jump := end + 1
		if nextRecv < len(script) {
			jump = script[nextRecv].at
		}
		if !next.IsZero() && next.Sub(epoch) < jump {
			jump = next.Sub(epoch)
		}
		require.Greater(t, jump, now, "Next does not move on")
		now = jump
	}
	return got, states, changes
}

// TestNextIsExact: an adapter that calls Update only at Output.Next sends
// the same datagrams at the same instants, and changes state at the same
// instants, as one that calls Update every millisecond. So Next is never
// late (the protocol's timing is kept) and never needed more often.
func TestNextIsExact(t *testing.T) {
	ms := time.Millisecond
	sec := time.Second
	tokenWith := func(timeout int32, servers ...netip.AddrPort) []byte {
		tok, err := tokentest.GenerateWith(token.Params{
			ProtocolID: protocolID, ClientID: 42, PrivateKey: privKey, ServerAddrs: servers,
			ExpireSeconds: 30, TimeoutSeconds: timeout,
		}, uint64(epoch.Unix()), tokNonce, c2sKey, s2cKey)
		require.NoError(t, err)
		return tok
	}
	keepAlives := func(from netip.AddrPort, start, stop time.Duration) []scripted {
		var s []scripted
		for at := start; at < stop; at += 100 * ms {
			s = append(s, scripted{at, from, (*serverPackets).keepAlive})
		}
		return s
	}
	payload := func(s *serverPackets) []byte {
		return s.next(func(dst []byte, key *crypto.PacketAEAD, seq uint64) []byte {
			return protocol.AppendPayload(dst, key, seq, []byte("state update"))
		})
	}
	tests := []struct {
		name   string
		tok    []byte
		script []scripted
		end    time.Duration
		want   State
	}{
		{
			name: "silent, denied, connected, timed out",
			tok:  tokenWith(5, srvA, srvB, srvC),
			script: append([]scripted{
				{5300 * ms, srvB, (*serverPackets).denied},
				{5450 * ms, srvC, (*serverPackets).challenge},
				{5612 * ms, srvC, (*serverPackets).keepAlive},
				{5700 * ms, srvC, payload},
			}, keepAlives(srvC, 5750*ms, 8*sec)...),
			end:  15 * sec,
			want: ConnectionTimedOut,
		},
		{
			name:   "challenged, never accepted",
			tok:    tokenWith(5, srvA),
			script: []scripted{{1234 * ms, srvA, (*serverPackets).challenge}},
			end:    10 * sec,
			want:   ConnectionResponseTimedOut,
		},
		{
			name:   "no timeout: the token expires",
			tok:    tokenWith(-1, srvA),
			script: nil,
			end:    31 * sec,
			want:   ConnectTokenExpired,
		},
		{
			name: "denied after the challenge",
			tok:  tokenWith(5, srvA),
			script: []scripted{
				{300 * ms, srvA, (*serverPackets).challenge},
				{777 * ms, srvA, (*serverPackets).denied},
			},
			end:  2 * sec,
			want: ConnectionDenied,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tickSent, tickStates, tickAt := runScript(t, tt.tok, tt.script, tt.end, ms)
			nextSent, nextStates, nextAt := runScript(t, tt.tok, tt.script, tt.end, 0)
			require.Equal(t, tt.want, tickStates[len(tickStates)-1])
			require.Equal(t, tickStates, nextStates)
			require.Equal(t, tickAt, nextAt, "state changes at other instants")
			require.Equal(t, len(tickSent), len(nextSent))
			for i := range tickSent {
				require.Equal(t, tickSent[i], nextSent[i], "datagram %d", i)
			}
			require.NotEmpty(t, tickSent)
		})
	}
}

// TestDisconnectOutput: Disconnect puts the redundant disconnect packets in
// one Output, each a disconnect the server reads, in sequence; a second
// Disconnect sends nothing.
func TestDisconnectOutput(t *testing.T) {
	d := newTestClient(t, srvA)
	srv := &serverPackets{key: crypto.NewPacketAEAD(&s2cKey, protocolID)}
	d.Update(epoch)
	d.Receive(epoch, srvA, srv.challenge())
	d.Update(epoch)
	d.Receive(epoch, srvA, srv.keepAlive())
	require.Equal(t, Connected, d.c.State())

	d.c.SetSequence(1000)
	d.c.Disconnect(&d.out)
	require.True(t, d.out.Changed())
	require.Equal(t, Connected, d.out.From)
	require.Equal(t, Disconnected, d.out.To)
	require.True(t, d.out.Next.IsZero())
	require.Len(t, d.out.Datagrams, DisconnectPackets)
	r := protocol.Reader{ProtocolID: protocolID, Allowed: protocol.ServerAccepts}
	key := crypto.NewPacketAEAD(&c2sKey, protocolID)
	var replay protocol.ReplayProtection
	for i, m := range d.out.Datagrams {
		require.Equal(t, srvA, m.Addr)
		var p protocol.Packet
		require.NoError(t, r.Read(append([]byte(nil), m.Buf...), 0, key, &replay, &p), "datagram %d", i)
		require.Equal(t, protocol.Disconnect, p.Type)
		require.Equal(t, uint64(1000+i), p.Sequence)
	}
	d.c.Disconnect(&d.out)
	require.Empty(t, d.out.Datagrams)
	require.False(t, d.out.Changed())
}

// connectedClient returns a client connected to srvA and the server's side
// of the keys.
func connectedClient(t testing.TB) (*Client, *serverPackets) {
	c := New(epoch, testToken(t, srvA), nil)
	srv := &serverPackets{key: crypto.NewPacketAEAD(&s2cKey, protocolID)}
	var out Output
	c.Update(epoch, &out)
	c.Receive(epoch, srvA, srv.challenge(), &out)
	c.Update(epoch, &out)
	c.Receive(epoch, srvA, srv.keepAlive(), &out)
	if c.State() != Connected {
		t.Fatalf("state %v, want connected", c.State())
	}
	return c, srv
}

// payloadPackets seals n payload packets from the server.
func payloadPackets(srv *serverPackets, n int) [][]byte {
	body := make([]byte, 100)
	pkts := make([][]byte, n)
	for i := range pkts {
		pkts[i] = srv.next(func(dst []byte, key *crypto.PacketAEAD, seq uint64) []byte {
			return protocol.AppendPayload(dst, key, seq, body)
		})
	}
	return pkts
}

// TestOutputAllocs: in steady state, receiving a payload, sending one and
// the keep-alive Update allocate nothing.
func TestOutputAllocs(t *testing.T) {
	c, srv := connectedClient(t)
	pkts := payloadPackets(srv, 1000)
	buf := make([]byte, protocol.MaxPacketBytes)
	payload := make([]byte, 100)
	var out Output
	now := epoch
	i := 0
	allocs := testing.AllocsPerRun(200, func() {
		now = now.Add(50 * time.Millisecond)
		n := copy(buf, pkts[i])
		i++
		c.Receive(now, srvA, buf[:n], &out)
		if len(out.Payload) != len(payload) {
			t.Fatalf("payload of %d bytes", len(out.Payload))
		}
		if err := c.Send(now, payload, &out); err != nil || len(out.Datagrams) != 1 {
			t.Fatalf("send: %v, %d datagrams", err, len(out.Datagrams))
		}
		c.Update(now, &out)
	})
	require.Zero(t, allocs)
	require.Equal(t, Connected, c.State())
}

// BenchmarkReceivePayload measures Receive of one 100-byte payload.
func BenchmarkReceivePayload(b *testing.B) {
	c, srv := connectedClient(b)
	buf := make([]byte, protocol.MaxPacketBytes)
	var out Output
	b.ReportAllocs()
	b.SetBytes(100)
	var pkts [][]byte
	for i := 0; b.Loop(); i++ {
		if i%4096 == 0 {
			b.StopTimer()
			pkts = payloadPackets(srv, 4096)
			b.StartTimer()
		}
		n := copy(buf, pkts[i%4096])
		c.Receive(epoch, srvA, buf[:n], &out)
		if out.Payload == nil {
			b.Fatal("payload refused")
		}
	}
}

// BenchmarkSend measures Send of one 100-byte payload.
func BenchmarkSend(b *testing.B) {
	c, _ := connectedClient(b)
	payload := make([]byte, 100)
	var out Output
	b.ReportAllocs()
	b.SetBytes(100)
	for b.Loop() {
		if err := c.Send(epoch, payload, &out); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzReceive feeds a client, in each state it can be in while live, one
// datagram from its server: hostile input must never panic, never make the
// client send from Receive, and leave the Output consistent (a payload only
// when connected, a Next while the state is live, none once final).
func FuzzReceive(f *testing.F) {
	srv := &serverPackets{key: crypto.NewPacketAEAD(&s2cKey, protocolID)}
	for _, p := range [][]byte{srv.challenge(), srv.keepAlive(), srv.denied(), srv.disconnect(), payloadPackets(srv, 1)[0], {}, {0x07}} {
		f.Add(uint8(0), p)
		f.Add(uint8(1), p)
		f.Add(uint8(2), p)
	}
	tok := testToken(f, srvA)
	f.Fuzz(func(t *testing.T, state uint8, data []byte) {
		c := New(epoch, tok, nil)
		srv := &serverPackets{key: crypto.NewPacketAEAD(&s2cKey, protocolID)}
		var out Output
		c.Update(epoch, &out)
		if state%3 >= 1 {
			c.Receive(epoch, srvA, srv.challenge(), &out)
		}
		if state%3 == 2 {
			c.Update(epoch, &out)
			c.Receive(epoch, srvA, srv.keepAlive(), &out)
		}
		from := c.State()
		c.Receive(epoch, srvA, data, &out)
		if len(out.Datagrams) != 0 {
			t.Fatalf("Receive sent %d datagrams", len(out.Datagrams))
		}
		if out.From != from || out.To != c.State() {
			t.Fatalf("Output says %v → %v, the client went %v → %v", out.From, out.To, from, c.State())
		}
		if out.Payload != nil && (from != Connected || len(out.Payload) > protocol.MaxPayloadBytes) {
			t.Fatalf("a payload of %d bytes in %v", len(out.Payload), from)
		}
		if live := c.State() > Disconnected; live == out.Next.IsZero() {
			t.Fatalf("Next %v in %v", out.Next, c.State())
		}
		c.Update(epoch.Add(time.Second), &out)
	})
}

// TestSendBatch: SendBatch seals each payload as a packet of its own the
// server reads, at consecutive sequences, continuing the sequence of
// Send; a payload of a size Send refuses stops the batch there, and a
// client not connected sends nothing.
func TestSendBatch(t *testing.T) {
	c, _ := connectedClient(t)
	c.SetSequence(500)
	var out Output
	require.NoError(t, c.Send(epoch, []byte{9}, &out))
	ps := [][]byte{{1}, make([]byte, protocol.MaxPayloadBytes), {3, 3, 3}}
	n, err := c.SendBatch(epoch, ps, &out)
	require.NoError(t, err)
	require.Equal(t, len(ps), n)
	require.Len(t, out.Datagrams, len(ps))
	r := protocol.Reader{ProtocolID: protocolID, Allowed: protocol.ServerAccepts}
	key := crypto.NewPacketAEAD(&c2sKey, protocolID)
	var replay protocol.ReplayProtection
	for i, m := range out.Datagrams {
		require.Equal(t, srvA, m.Addr)
		var p protocol.Packet
		require.NoError(t, r.Read(append([]byte(nil), m.Buf...), 0, key, &replay, &p), "datagram %d", i)
		require.Equal(t, protocol.Payload, p.Type)
		require.Equal(t, uint64(501+i), p.Sequence)
		require.Equal(t, ps[i], p.Payload)
	}

	n, err = c.SendBatch(epoch, [][]byte{{1}, {}, {2}}, &out)
	require.ErrorIs(t, err, ErrPayloadSize)
	require.Equal(t, 1, n)
	require.Len(t, out.Datagrams, 1, "the payloads before the refused one")

	c.Disconnect(&out)
	n, err = c.SendBatch(epoch, ps, &out)
	require.ErrorIs(t, err, ErrNotConnected)
	require.Zero(t, n)
	require.Empty(t, out.Datagrams)
}
