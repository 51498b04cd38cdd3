package core

import (
	"encoding/binary"
	"flag"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/gonetcode/netcode/internal/testing/netsim"
	"github.com/stretchr/testify/require"
)

var soakDuration = flag.Duration("cute.soak", 0, "simulated duration of the Cute soak (0: 60 s)")

// legal are the client state changes one call may make.
var legal = map[[2]State]bool{
	{SendingConnectionRequest, SendingChallengeResponse}:  true,
	{SendingConnectionRequest, ConnectionDenied}:          true,
	{SendingConnectionRequest, ConnectionRequestTimedOut}: true,
	{SendingConnectionRequest, ConnectTokenExpired}:       true,
	{SendingChallengeResponse, Connected}:                 true,
	{SendingChallengeResponse, ConnectionDenied}:          true,
	{SendingChallengeResponse, ChallengeResponseTimedOut}: true,
	{SendingChallengeResponse, ConnectionRequestTimedOut}: true, // the C client's failure state carries over
	{SendingChallengeResponse, ConnectTokenExpired}:       true,
	{Connected, Disconnected}:                             true,
	{Connected, ConnectionTimedOut}:                       true,
	{SendingConnectionRequest, Disconnected}:              true,
	{SendingChallengeResponse, Disconnected}:              true,
}

// TestSoak churns clients through a server over a lossy, jittery,
// duplicating, reordering simulated network: clients arrive with fresh
// tokens, send payloads the server echoes, leave, or go silent and are timed
// out; a few replay a used token or arrive when the server is full. After
// every step the server's tables must agree; every client state change must
// be legal; every echo a client gets must be one it sent, and none twice.
func TestSoak(t *testing.T) {
	d := *soakDuration
	if d == 0 {
		d = 60 * time.Second
	}
	rng := rand.New(rand.NewPCG(1, 2))
	network := netsim.New(7, netsim.Config{Latency: 20 * time.Millisecond, Jitter: 15 * time.Millisecond,
		Loss: 0.05, Duplicate: 0.03, Reorder: 0.05})
	s, _ := newServer(t, func(c *ServerConfig) {
		c.MaxClients = 12
		c.MaxPending = 6
		c.ConnectionTimeout = 3 * time.Second
	})
	type agent struct {
		c      *Client
		addr   netip.AddrPort
		token  []byte
		silent bool
		ghost  bool // sends its token, then nothing: the handshake must expire
		sent   map[uint64]bool
		echoed map[uint64]bool
		next   uint64
	}
	agents := map[netip.AddrPort]*agent{}
	now := t0
	var cout ClientOutput
	var sout ServerOutput
	nextID := uint64(1)
	connects, echoes, refusedReplays := 0, 0, 0
	var used [][]byte

	sendAll := func(from netip.AddrPort, dg datagrams) {
		for _, m := range dg.Datagrams {
			network.Send(now, from, m.Addr, m.Buf)
		}
	}
	check := func(a *agent, o *ClientOutput) {
		if o.Changed() && !legal[[2]State{o.From, o.To}] {
			t.Fatalf("client %v: %s -> %s", a.addr, o.From, o.To)
		}
		if o.From != Connected && o.To == Connected {
			connects++
		}
	}
	for end := t0.Add(d); now.Before(end); now = now.Add(10 * time.Millisecond) {
		// Arrivals: a fresh token, now and then a used one.
		if rng.IntN(40) == 0 {
			addr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 3, byte(nextID >> 8), byte(nextID)}), 4000)
			tok := makeToken(t, tokenOpts{clientID: nextID, expire: 20, handshake: 2, created: now.Truncate(time.Second)})
			if len(used) > 0 && rng.IntN(5) == 0 {
				tok = used[rng.IntN(len(used))]
			}
			nextID++
			c, err := NewClient(now, tok, testApp)
			if err == nil {
				agents[addr] = &agent{c: c, addr: addr, token: tok, ghost: rng.IntN(8) == 0, sent: map[uint64]bool{}, echoed: map[uint64]bool{}}
			}
		}
		network.Deliver(now, func(from, to netip.AddrPort, b []byte) {
			if to == testServer {
				s.Receive(now, from, b, &sout)
				sendAll(testServer, sout.datagrams)
				for _, e := range sout.Events {
					if e.Kind == EventPayload {
						p := append([]byte(nil), e.Payload...)
						if s.Send(now, e.Index, p, &sout) == nil {
							sendAll(testServer, sout.datagrams)
						}
					}
				}
				return
			}
			a := agents[to]
			if a == nil || a.silent {
				return
			}
			a.c.Receive(now, from, b, &cout)
			check(a, &cout)
			if cout.Payload != nil {
				require.GreaterOrEqual(t, len(cout.Payload), 8)
				n := binary.LittleEndian.Uint64(cout.Payload)
				require.True(t, a.sent[n], "an echo the client never sent")
				require.False(t, a.echoed[n], "an echo delivered twice")
				a.echoed[n] = true
				echoes++
			}
		})
		for addr, a := range agents {
			if a.silent {
				continue
			}
			a.c.Update(now, &cout)
			check(a, &cout)
			sendAll(addr, cout.datagrams)
			if a.ghost {
				a.silent = true
				continue
			}
			st := a.c.State()
			switch {
			case st <= Disconnected:
				if st == ConnectionDenied || st == ConnectionRequestTimedOut || st == ChallengeResponseTimedOut {
					refusedReplays++
				}
				delete(agents, addr)
			case st == Connected:
				if rng.IntN(500) == 0 {
					a.c.Disconnect(now, &cout)
					check(a, &cout)
					sendAll(addr, cout.datagrams)
					used = append(used, a.token)
				} else if rng.IntN(800) == 0 {
					a.silent = true // gone without a word: the server times it out
					used = append(used, a.token)
				} else if rng.IntN(5) == 0 {
					p := make([]byte, 8+rng.IntN(1197))
					a.next++
					binary.LittleEndian.PutUint64(p, a.next)
					a.sent[a.next] = true
					require.NoError(t, a.c.Send(now, p, &cout))
					sendAll(addr, cout.datagrams)
				}
			}
		}
		s.Update(now, &sout)
		sendAll(testServer, sout.datagrams)
		checkServer(t, s)
	}
	st := s.Stats()
	t.Logf("%v simulated: %d connections, %d echoes, %d clients ended refused or timed out; server %+v; network %+v",
		d, connects, echoes, refusedReplays, st, network.Stats())
	require.Positive(t, connects)
	require.Positive(t, echoes)
	require.Positive(t, st.PendingExpired, "ghosts' handshakes expire")
	require.LessOrEqual(t, s.PendingCount(), 6)
}
