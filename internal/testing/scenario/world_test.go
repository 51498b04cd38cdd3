// Package scenario tests the server and client cores together, on simulated
// time over the in-memory network: every timing rule of the protocol runs in
// microseconds and deterministically.
package scenario

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/client"
	"github.com/gonetcode/netcode/internal/server"
	"github.com/gonetcode/netcode/internal/testing/netsim"
	"github.com/gonetcode/netcode/internal/testing/tokentest"
	"github.com/gonetcode/netcode/token"
	"github.com/stretchr/testify/require"
)

const (
	protocolID = 0x1122334455667788
	tick       = 10 * time.Millisecond
)

var (
	privateKey = crypto.Key{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32}
	epoch      = time.Unix(1_800_000_000, 0)
)

// world is a simulated network with servers and clients on it.
type world struct {
	t       *testing.T
	now     time.Time
	net     *netsim.Network
	servers map[netip.AddrPort]*srvNode
	clients map[netip.AddrPort]*cliNode
	order   []*cliNode
	// tap, if set, sees every datagram delivered (after the network).
	tap func(from, to netip.AddrPort, b []byte)
	// seq makes distinct token nonces and keys.
	seq byte
}

func newWorld(t *testing.T, cfg netsim.Config) *world {
	return newSeededWorld(t, 1, cfg)
}

// newSeededWorld is newWorld with the network's random choices drawn from
// seed.
func newSeededWorld(t *testing.T, seed uint64, cfg netsim.Config) *world {
	return &world{
		t:       t,
		now:     epoch,
		net:     netsim.New(int64(seed), cfg),
		servers: map[netip.AddrPort]*srvNode{},
		clients: map[netip.AddrPort]*cliNode{},
	}
}

// sender is what a core's datagrams go out through.
type sender interface {
	Send(to netip.AddrPort, b []byte)
}

// sink sends from one address into the simulated network.
type sink struct {
	w    *world
	from netip.AddrPort
}

func (s sink) Send(to netip.AddrPort, b []byte) { s.w.net.Send(s.w.now, s.from, to, b) }

type srvNode struct {
	addr      netip.AddrPort
	core      *server.Server
	ev        events
	sink      sink
	out       server.Output // the core's calls report here; flush sends it
	connected []*server.Client
	left      map[*server.Client]server.Reason
	payloads  map[*server.Client][][]byte
}

func (n *srvNode) Connected(c *server.Client) { n.connected = append(n.connected, c) }

// flush sends the datagrams the core's calls put in n.out, in order, and
// empties it (the adapter's job).
func (n *srvNode) flush() {
	for _, m := range n.out.Datagrams {
		n.sink.Send(m.Addr, m.Buf)
	}
	n.out.Reset()
}

// send sends p to c, as a Conn's Write does.
func (n *srvNode) send(c *server.Client, now time.Time, p []byte) error {
	err := c.Send(now, p, &n.out)
	n.flush()
	return err
}

// disconnect ends c's connection from the server side.
func (n *srvNode) disconnect(c *server.Client) {
	n.core.Disconnect(c, &n.out)
	n.flush()
}

// close closes the server core.
func (n *srvNode) close() {
	n.core.Close(&n.out)
	n.flush()
}
func (n *srvNode) Payload(c *server.Client, p []byte) {
	n.payloads[c] = append(n.payloads[c], append([]byte(nil), p...))
}
func (n *srvNode) Disconnected(c *server.Client, why server.Reason) { n.left[c] = why }

// live returns the clients connected now.
func (n *srvNode) live() []*server.Client {
	var out []*server.Client
	for _, c := range n.connected {
		if _, gone := n.left[c]; !gone {
			out = append(out, c)
		}
	}
	return out
}

func (w *world) addServer(addr string, maxClients int) *srvNode {
	ap := netip.MustParseAddrPort(addr)
	n := &srvNode{addr: ap, sink: sink{w, ap}, left: map[*server.Client]server.Reason{}, payloads: map[*server.Client][][]byte{}}
	core, err := server.New(server.Config{
		ProtocolID: protocolID,
		PrivateKey: privateKey,
		MaxClients: maxClients,
		Addrs:      []netip.AddrPort{ap},
		Now:        w.now,
	})
	require.NoError(w.t, err)
	n.core = core
	n.ev.h = n
	w.servers[ap] = n
	return n
}

type cliNode struct {
	addr     netip.AddrPort
	core     *client.Client
	sink     sink
	states   []client.State
	payloads [][]byte
	// ignore, if set, discards the datagrams it returns true for before
	// the core sees them: a client that ignores them.
	ignore func(b []byte) bool
	out    client.Output // the core's calls report here
}

// start gives n a client core for tok.
func (n *cliNode) start(w *world, tok []byte) {
	n.core = client.New(w.now, tok, nil)
	n.states = append(n.states, n.core.State())
}

// apply acts on what the core's last call reported: it records the state
// change and the payload, and sends the datagrams through s.
func (n *cliNode) apply(s sender) {
	if n.out.Changed() {
		n.states = append(n.states, n.out.To)
	}
	if n.out.Payload != nil {
		n.payloads = append(n.payloads, append([]byte(nil), n.out.Payload...))
	}
	for _, m := range n.out.Datagrams {
		s.Send(m.Addr, m.Buf)
	}
}

func (n *cliNode) receive(now time.Time, from netip.AddrPort, b []byte) {
	n.core.Receive(now, from, b, &n.out)
	n.apply(n.sink)
}

func (n *cliNode) update(now time.Time) {
	n.core.Update(now, &n.out)
	n.apply(n.sink)
}

func (n *cliNode) send(now time.Time, p []byte) error {
	err := n.core.Send(now, p, &n.out)
	n.apply(n.sink)
	return err
}

func (n *cliNode) disconnect() {
	n.core.Disconnect(&n.out)
	n.apply(n.sink)
}

// tokenFor mints a token for the given servers.
func (w *world) tokenFor(clientID uint64, expire int64, timeout int32, servers ...string) []byte {
	p := token.Params{
		ProtocolID:     protocolID,
		ClientID:       clientID,
		PrivateKey:     privateKey,
		ExpireSeconds:  expire,
		TimeoutSeconds: timeout,
	}
	for _, s := range servers {
		p.ServerAddrs = append(p.ServerAddrs, netip.MustParseAddrPort(s))
	}
	copy(p.UserData[:], fmt.Sprintf("user %d", clientID))
	w.seq++
	// Distinct, deterministic nonces and keys for every token.
	var nonce [crypto.TokenNonceBytes]byte
	c2s, s2c := crypto.Key{1: 1}, crypto.Key{1: 2}
	nonce[0], c2s[0], s2c[0] = w.seq, w.seq, w.seq
	binary.LittleEndian.PutUint64(nonce[2:], clientID)
	binary.LittleEndian.PutUint64(c2s[2:], clientID)
	binary.LittleEndian.PutUint64(s2c[2:], clientID)
	tok, err := tokentest.GenerateWith(p, uint64(w.now.Unix()), nonce, c2s, s2c)
	require.NoError(w.t, err)
	return tok
}

func (w *world) addClient(addr string, tok []byte) *cliNode {
	ap := netip.MustParseAddrPort(addr)
	n := &cliNode{addr: ap, sink: sink{w, ap}}
	n.start(w, tok)
	w.clients[ap] = n
	w.order = append(w.order, n)
	return n
}

// step advances simulated time by one tick: deliver what is due, then let
// every node send and check its timers.
func (w *world) step() {
	w.now = w.now.Add(tick)
	w.net.Deliver(w.now, func(from, to netip.AddrPort, b []byte) {
		if w.tap != nil {
			w.tap(from, to, b)
		}
		buf := append([]byte(nil), b...)
		if s := w.servers[to]; s != nil {
			s.ev.connected(s.core.Receive(w.now, from, buf, &s.out))
			s.flush()
		} else if c := w.clients[to]; c != nil && (c.ignore == nil || !c.ignore(buf)) {
			c.receive(w.now, from, buf)
		}
	})
	for _, s := range w.servers {
		s.ev.collect()
		s.core.Update(w.now, &s.out)
		s.flush()
		s.ev.collect()
	}
	for _, c := range w.order {
		c.update(w.now)
	}
}

// run advances simulated time by d.
func (w *world) run(d time.Duration) {
	for end := w.now.Add(d); w.now.Before(end); {
		w.step()
	}
}

// runUntil advances time until cond holds, failing after limit.
func (w *world) runUntil(limit time.Duration, cond func() bool) {
	w.t.Helper()
	for end := w.now.Add(limit); !cond(); {
		if !w.now.Before(end) {
			w.t.Fatalf("condition not reached within %v of simulated time", limit)
		}
		w.step()
	}
}

func (c *cliNode) is(s client.State) func() bool {
	return func() bool { return c.core.State() == s }
}

func (c *cliNode) final() func() bool {
	return func() bool { return c.core.State() <= client.Disconnected }
}
