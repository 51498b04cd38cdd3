package scenario

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/gonetcode/netcode/internal/client"
	"github.com/gonetcode/netcode/internal/netsim"
	"github.com/gonetcode/netcode/internal/server"
	"github.com/stretchr/testify/require"
)

var (
	soakDuration = flag.Duration("soak", 0, "simulated duration of the long soak test (0: the short CI version)")
	soakSeed     = flag.Uint64("soak.seed", 1, "random seed of the soak test")
)

// soakServer echoes every payload back to its sender after the Receive call
// that delivered it (handlers must not send while the server's lock is held).
type soakServer struct {
	core    *server.Server
	live    map[*server.Client]bool
	order   []*server.Client // live clients in connection order, for deterministic picks
	echo    []soakEcho
	opened  int
	left    map[server.Reason]int
	badData int
}

type soakEcho struct {
	c *server.Client
	p []byte
}

func (s *soakServer) Connected(c *server.Client) {
	s.live[c] = true
	s.order = append(s.order, c)
	s.opened++
}
func (s *soakServer) Payload(c *server.Client, p []byte) {
	// A payload names the client id that sent it: a payload arriving on
	// another client's connection would be a demultiplexing bug.
	if len(p) < 8 || binary.LittleEndian.Uint64(p) != c.ID() {
		s.badData++
		return
	}
	s.echo = append(s.echo, soakEcho{c, append([]byte(nil), p...)})
}
func (s *soakServer) Disconnected(c *server.Client, why server.Reason) {
	delete(s.live, c)
	s.order = slices.DeleteFunc(s.order, func(o *server.Client) bool { return o == c })
	s.left[why]++
}

// soakActor is one client that connects, plays, leaves and comes back at
// random.
type soakActor struct {
	addr    netip.AddrPort
	core    *client.Client
	id      uint64
	gen     int
	wantOff bool      // it asked to disconnect
	next    time.Time // when it next acts
	states  []client.State
	sent    int
	echoed  int
	bad     int
}

func (a *soakActor) StateChanged(from, to client.State) { a.states = append(a.states, to) }
func (a *soakActor) Payload(p []byte) {
	if len(p) < 8 || binary.LittleEndian.Uint64(p) != a.id {
		a.bad++
		return
	}
	a.echoed++
}

// TestSoak runs 64 clients against one server over a hostile simulated
// network (10% loss, jitter, duplication, reordering). Clients connect,
// exchange payloads, disconnect and reconnect at random; the server also
// kicks clients at random. Nothing may end a connection except those
// decisions: no timeouts, no denials, no handshake failures; every payload
// arrives on the right connection; and at the end every slot is free.
//
// The CI version simulates 60 seconds; -soak=30m runs a long one.
func TestSoak(t *testing.T) {
	simulated := 60 * time.Second
	if *soakDuration > 0 {
		simulated = *soakDuration
	}
	const actors = 64
	rng := rand.New(rand.NewPCG(*soakSeed, 0x50a4))
	w := newWorld(t, netsim.Config{
		Latency:      30 * time.Millisecond,
		Jitter:       20 * time.Millisecond,
		Loss:         0.10,
		Duplicate:    0.05,
		Reorder:      0.05,
		ReorderDelay: 40 * time.Millisecond,
	})
	srvAP := netip.MustParseAddrPort(srvAddr)
	srv := &soakServer{live: map[*server.Client]bool{}, left: map[server.Reason]int{}}
	core, err := server.New(server.Config{
		ProtocolID: protocolID,
		PrivateKey: privateKey,
		MaxClients: actors,
		Addrs:      []netip.AddrPort{srvAP},
		Now:        w.now,
	}, srv)
	require.NoError(t, err)
	srv.core = core
	ssink := sink{w, srvAP}

	as := make([]*soakActor, actors)
	byAddr := map[netip.AddrPort]*soakActor{}
	for i := range as {
		a := &soakActor{addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 2, byte(i >> 8), byte(i)}), 6000)}
		a.next = w.now.Add(time.Duration(rng.IntN(2000)) * time.Millisecond)
		as[i] = a
		byAddr[a.addr] = a
	}
	var nextID uint64 = 1
	connect := func(a *soakActor) {
		a.id = nextID
		nextID++
		a.gen++
		a.wantOff = false
		a.states = a.states[:0]
		a.core = client.New(w.now, w.tokenFor(a.id, 600, 5, srvAddr), a, nil)
	}
	kicked := map[uint64]bool{}
	var (
		sessions, kicks, leaves int
		failures                []string
	)
	// settle judges a session that ended.
	settle := func(a *soakActor) {
		st := a.core.State()
		switch {
		case st == client.Disconnected:
			// By the rules: it asked to leave, or the server kicked it.
		case st == client.ConnectionResponseTimedOut && kicked[a.id]:
			// Kicked right after the server accepted it, before any
			// keep-alive reached it: the client still sends responses to
			// a server that has forgotten it, as in the reference.
		default:
			failures = append(failures, fmt.Sprintf("client %d (gen %d) ended in %v after %v", a.id, a.gen, st, a.states))
		}
		a.core = nil
	}
	payload := make([]byte, 64)
	// advance moves simulated time one tick: deliver, echo, update timers.
	advance := func() {
		w.now = w.now.Add(tick)
		w.net.Deliver(w.now, func(from, to netip.AddrPort, b []byte) {
			buf := append([]byte(nil), b...)
			if to == srvAP {
				core.Receive(w.now, from, buf, ssink)
			} else if a := byAddr[to]; a != nil && a.core != nil {
				a.core.Receive(w.now, from, buf)
			}
		})
		for _, e := range srv.echo {
			_ = e.c.Send(w.now, e.p, ssink) // ErrClientGone is fine: it left meanwhile
		}
		srv.echo = srv.echo[:0]
		core.Update(w.now, ssink)
		for _, a := range as {
			if a.core != nil {
				a.core.Update(w.now, sink{w, a.addr})
			}
		}
	}
	for end := w.now.Add(simulated); w.now.Before(end); {
		advance()
		// The server kicks a random client now and then.
		if rng.IntN(200) == 0 && len(srv.order) > 0 {
			c := srv.order[rng.IntN(len(srv.order))]
			kicked[c.ID()] = true
			core.Disconnect(c, ssink)
			kicks++
		}
		for _, a := range as {
			if a.core == nil {
				if !w.now.Before(a.next) {
					connect(a)
					sessions++
				}
				continue
			}
			switch st := a.core.State(); {
			case st == client.Connected:
				if rng.IntN(4) == 0 {
					binary.LittleEndian.PutUint64(payload, a.id)
					binary.LittleEndian.PutUint64(payload[8:], uint64(a.sent))
					require.NoError(t, a.core.Send(w.now, payload[:16+rng.IntN(48)], sink{w, a.addr}))
					a.sent++
				}
				if !w.now.Before(a.next) && rng.IntN(500) == 0 {
					a.core.Disconnect(sink{w, a.addr})
					a.wantOff = true
					leaves++
				}
			case st <= client.Disconnected:
				settle(a)
				a.next = w.now.Add(time.Duration(200+rng.IntN(3000)) * time.Millisecond)
			}
		}
	}
	// Everyone leaves; the server must free every slot.
	for _, a := range as {
		if a.core != nil && a.core.State() > client.Disconnected {
			a.core.Disconnect(sink{w, a.addr})
		}
	}
	for range 200 {
		advance()
	}

	t.Logf("simulated %v: %d sessions, %d client leaves, %d server kicks, server saw %d opened, left %v; network %+v",
		simulated, sessions, leaves, kicks, srv.opened, srv.left, w.net.Stats())
	require.Empty(t, failures, "connections lost other than by the rules")
	require.Zero(t, srv.badData, "payloads delivered on the wrong server connection")
	require.Zero(t, srv.left[server.ReasonTimedOut], "server timed out a client")
	for _, a := range as {
		require.Zero(t, a.bad, "echoes delivered to the wrong client")
	}
	require.Empty(t, srv.live)
	require.Zero(t, core.Stats().Connected)
	for i := range actors {
		require.Nil(t, core.ClientByIndex(i), "slot %d still taken", i)
	}
	require.Greater(t, sessions, actors, "clients reconnected")
	require.Greater(t, srv.opened, actors)
	require.Positive(t, kicks)
	echoed := 0
	for _, a := range as {
		echoed += a.echoed
	}
	require.Positive(t, echoed)
}
