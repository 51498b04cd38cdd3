package scenario

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gonetcode/netcode/internal/client"
	"github.com/gonetcode/netcode/internal/server"
	"github.com/gonetcode/netcode/internal/testing/netsim"
	"github.com/stretchr/testify/require"
)

var (
	soakDuration = flag.Duration("soak", 0, "simulated duration of each soak run (0: the short default, 60 s)")
	soakSeeds    = flag.String("soak.seeds", "1", `seeds of the soak runs, each run in parallel: a list with ranges, e.g. "2" or "1,2,11" or "1-20"`)
)

// parseSeeds reads a -soak.seeds value: comma-separated seeds and
// inclusive ranges lo-hi, no seed twice.
func parseSeeds(s string) ([]uint64, error) {
	var out []uint64
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("seed %q: %w", part, err)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 64); err != nil {
				return nil, fmt.Errorf("seed range %q: %w", part, err)
			}
			if b < a || b-a >= 10000 {
				return nil, fmt.Errorf("seed range %q: empty or over 10000 seeds", part)
			}
		}
		for x := a; ; x++ {
			if slices.Contains(out, x) {
				return nil, fmt.Errorf("seed %d given twice", x)
			}
			out = append(out, x)
			if x == b {
				break
			}
		}
	}
	return out, nil
}

func TestParseSeeds(t *testing.T) {
	tests := []struct {
		in      string
		want    []uint64
		wantErr bool
	}{
		{in: "1", want: []uint64{1}},
		{in: "1,2,11", want: []uint64{1, 2, 11}},
		{in: "1-4", want: []uint64{1, 2, 3, 4}},
		{in: " 7 , 1-2", want: []uint64{7, 1, 2}},
		{in: "", wantErr: true},
		{in: "x", wantErr: true},
		{in: "3-1", wantErr: true},
		{in: "1-2,2", wantErr: true},
		{in: "0-99999", wantErr: true},
		{in: "1-", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseSeeds(tt.in)
		if tt.wantErr {
			require.Error(t, err, "%q", tt.in)
			continue
		}
		require.NoError(t, err, "%q", tt.in)
		require.Equal(t, tt.want, got, "%q", tt.in)
	}
}

// How the soak's sessions may end. This is the whole oracle: every state a
// client session can end in, and every reason the server gives for a
// connection's end, is listed with the rule that allows it or the reason it
// can never happen in the soak. TestSoakOracleIsComplete checks the lists
// against the cores' enumerations.
//
// What the soak guarantees, so that "never" holds: every token is freshly
// minted and valid for soakTokenExpiry; the server has a slot for every
// actor; the network loses 10% of datagrams, each independently, so the
// ten redundant disconnect packets all vanish once in 10^10 and a 5 s
// silence (some 50 keep-alives lost in a row) does not happen.

// soakEnd is what the oracle knows about a finished client session.
type soakEnd struct {
	reference bool          // the client ignores disconnects in sending connection response, as the reference does
	left      bool          // the client asked to leave (its Disconnect)
	kicked    bool          // the server ended it (Server.Disconnect)
	kickSeen  time.Duration // from the kick to the client's end, if kicked
}

// soakTokenExpiry is the tokens' lifetime in seconds: far longer than a
// handshake, and short enough that the tokens the server must remember
// (about ten sessions a second for a minute) stay well within its token
// history: the soak is not a history flood, which other tests make.
const soakTokenExpiry = 60

// kickNotice bounds how long a kicked client may take to learn it: the
// disconnects take at most 90 ms (latency, jitter, reordering), and one of
// ten gets through; a reference-like client that ignored them and was
// connected by a late keep-alive hears one of the server's reminders within
// a few keep-alive intervals. Far below the 5 s connection timeout, so a
// client that only timed out cannot pass for one that heard.
const kickNotice = 500 * time.Millisecond

// clientEndRule judges a session that ended in one state: "" if it ended
// by its rule, else what went wrong.
type clientEndRule struct {
	rule  string
	allow func(e soakEnd) string
}

func never(why string) clientEndRule {
	return clientEndRule{rule: "never: " + why, allow: func(soakEnd) string { return "not allowed: " + why }}
}

var clientEnds = map[client.State]clientEndRule{
	client.Disconnected: {
		rule: "the client asked to leave, or the server kicked it and the client heard a disconnect packet within kickNotice " +
			"(in connected, or in sending connection response: issue 15; a reference-like client connected by a late keep-alive " +
			"hears the server's reminders)",
		allow: func(e soakEnd) string {
			switch {
			case e.left:
				return ""
			case e.kicked && e.kickSeen <= kickNotice:
				return ""
			case e.kicked:
				return fmt.Sprintf("kicked, but the client learned it only %v later", e.kickSeen)
			}
			return "disconnected, but neither side decided so"
		},
	},
	client.ConnectionTimedOut: never("the server goes silent only after ending the connection, " +
		"which it announces with disconnect packets the client accepts, and reminds a reference-like client once it is connected"),
	client.ConnectionResponseTimedOut: {
		rule: "only a reference-like client kicked during the handshake whose keep-alive never came: it ignores the disconnects " +
			"in sending connection response, and the server reminds only clients that send keep-alives or payloads; " +
			"it times out as it would against a C server. Never our client: it accepts those disconnects",
		allow: func(e soakEnd) string {
			if e.reference && e.kicked {
				return ""
			}
			return "not allowed: a server that accepted the response and then forgot the client (a kick during the handshake) " +
				"announced it with disconnects the client accepts in sending connection response"
		},
	},
	client.ConnectionRequestTimedOut: never("the server is up and answers every valid request"),
	client.ConnectionDenied:          never("the server has a slot for every actor"),
	client.ConnectTokenExpired:       never("tokens are valid for 60 s and a handshake takes well under a second"),
	client.InvalidConnectToken:       never("every token is minted valid"),
}

// serverEndRule judges the server's reason for ending the connection of
// the client with the given id: "" if it is allowed, else what went wrong.
type serverEndRule struct {
	rule  string
	allow func(left, kicked bool) string
}

var serverEnds = map[server.Reason]serverEndRule{
	server.ReasonPeerDisconnected: {
		rule: "the client asked to leave",
		allow: func(left, _ bool) string {
			if left {
				return ""
			}
			return "a disconnect packet from a client that did not ask to leave"
		},
	},
	server.ReasonLocal: {
		rule: "the server kicked the client (Server.Disconnect)",
		allow: func(_, kicked bool) string {
			if kicked {
				return ""
			}
			return "ended locally, but the server never kicked it"
		},
	},
	server.ReasonTimedOut: {
		rule: "never: a client that leaves says so with disconnect packets, and one that stays sends keep-alives",
		allow: func(bool, bool) string {
			return "timed out a client"
		},
	},
}

// TestSoakOracleIsComplete: the oracle lists every final client state and
// every server reason, so no way of ending can pass unjudged.
func TestSoakOracleIsComplete(t *testing.T) {
	for s := client.State(-64); s <= client.Disconnected; s++ {
		if s.String() == "unknown" {
			continue
		}
		r, ok := clientEnds[s]
		require.True(t, ok, "client state %v is not in the soak's oracle", s)
		require.NotEmpty(t, r.rule)
	}
	for _, s := range []client.State{client.SendingConnectionRequest, client.SendingConnectionResponse, client.Connected} {
		require.NotContains(t, clientEnds, s, "not a final state")
	}
	for r := server.Reason(0); r < 64; r++ {
		if r.String() == "unknown" {
			continue
		}
		e, ok := serverEnds[r]
		require.True(t, ok, "server reason %v is not in the soak's oracle", r)
		require.NotEmpty(t, e.rule)
	}
	// The rules can fail.
	require.NotEmpty(t, clientEnds[client.Disconnected].allow(soakEnd{}))
	require.NotEmpty(t, clientEnds[client.Disconnected].allow(soakEnd{kicked: true, kickSeen: 5 * time.Second}))
	require.Empty(t, clientEnds[client.Disconnected].allow(soakEnd{kicked: true, kickSeen: 100 * time.Millisecond}))
	require.NotEmpty(t, clientEnds[client.ConnectionTimedOut].allow(soakEnd{left: true, kicked: true, reference: true}))
	require.NotEmpty(t, clientEnds[client.ConnectionResponseTimedOut].allow(soakEnd{kicked: true}))
	require.Empty(t, clientEnds[client.ConnectionResponseTimedOut].allow(soakEnd{kicked: true, reference: true}))
	require.NotEmpty(t, serverEnds[server.ReasonLocal].allow(true, false))
	require.NotEmpty(t, serverEnds[server.ReasonPeerDisconnected].allow(false, true))
}

// soakServer echoes every payload back to its sender after the Receive call
// that delivered it (handlers must not send while the server's lock is held).
type soakServer struct {
	live    map[*server.Client]bool
	order   []*server.Client // live clients in connection order, for deterministic picks
	echo    []soakEcho       // reused: entries keep their buffers
	opened  int
	left    map[server.Reason]int
	badData int
	// judge judges each end the server reports.
	judge func(c *server.Client, why server.Reason)
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
	n := len(s.echo)
	if n < cap(s.echo) {
		s.echo = s.echo[:n+1]
	} else {
		s.echo = append(s.echo, soakEcho{})
	}
	s.echo[n].c = c
	s.echo[n].p = append(s.echo[n].p[:0], p...)
}
func (s *soakServer) Disconnected(c *server.Client, why server.Reason) {
	delete(s.live, c)
	s.order = slices.DeleteFunc(s.order, func(o *server.Client) bool { return o == c })
	s.left[why]++
	s.judge(c, why)
}

// soakActor is one client that connects, plays, leaves and comes back at
// random.
type soakActor struct {
	addr netip.AddrPort
	sink sender        // sends from addr, made once
	out  client.Output // the core's calls report here
	// reference: the actor ignores disconnects in sending connection
	// response, as the reference client does (one actor in four).
	reference bool
	core      *client.Client
	id        uint64
	gen       int
	wantOff   bool      // it asked to disconnect
	next      time.Time // when it next acts
	states    []client.State
	sent      int
	echoed    int
	bad       int
}

// apply acts on what the core's last call reported.
func (a *soakActor) apply() {
	if a.out.Changed() {
		a.states = append(a.states, a.out.To)
	}
	if p := a.out.Payload; p != nil {
		if len(p) < 8 || binary.LittleEndian.Uint64(p) != a.id {
			a.bad++
		} else {
			a.echoed++
		}
	}
	for _, m := range a.out.Datagrams {
		a.sink.Send(m.Addr, m.Buf)
	}
}

// TestSoak runs 64 clients against one server over a hostile simulated
// network (10% loss, jitter, duplication, reordering). Clients connect,
// exchange payloads, disconnect and reconnect at random; the server also
// kicks clients at random. Every session's end, on both sides, is judged
// by the oracle above; every payload arrives on the right connection; and
// at the end every slot is free.
//
// By default one seed simulates 60 seconds. -soak=2h -soak.seeds=1,2 (as
// CI's soak step runs it) or -soak=24h -soak.seeds=1-20 run long ones;
// seeds run in parallel, as many at once as -parallel allows.
func TestSoak(t *testing.T) {
	simulated := 60 * time.Second
	if *soakDuration > 0 {
		simulated = *soakDuration
	}
	seeds, err := parseSeeds(*soakSeeds)
	require.NoError(t, err, "-soak.seeds")
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			if len(seeds) > 1 {
				t.Parallel()
			}
			soak(t, seed, simulated)
		})
	}
}

// soakReportEvery is how often a long soak logs its progress.
const soakReportEvery = time.Hour

// maxSoakFailures bounds the failures reported one by one.
const maxSoakFailures = 20

func soak(t *testing.T, seed uint64, simulated time.Duration) {
	const actors = 64
	rng := rand.New(rand.NewPCG(seed, 0x50a4))
	w := newSeededWorld(t, seed, netsim.Config{
		Latency:      30 * time.Millisecond,
		Jitter:       20 * time.Millisecond,
		Loss:         0.10,
		Duplicate:    0.05,
		Reorder:      0.05,
		ReorderDelay: 40 * time.Millisecond,
	})
	srvAP := netip.MustParseAddrPort(srvAddr)

	var (
		sessions, kicks, leaves int
		failures                int
		ends                    = map[string]int{}       // sessions by how they ended, for the log
		kickedAt                = map[uint64]time.Time{} // kicked clients, by id
		asked                   = map[uint64]bool{}      // clients that asked to leave, by id
	)
	fail := func(format string, args ...any) {
		failures++
		if failures <= maxSoakFailures {
			t.Errorf("seed %d, at %v: %s", seed, w.now.Sub(epoch), fmt.Sprintf(format, args...))
		}
	}
	srv := &soakServer{live: map[*server.Client]bool{}, left: map[server.Reason]int{}}

	srv.judge = func(c *server.Client, why server.Reason) {
		_, kicked := kickedAt[c.ID()]
		if bad := serverEnds[why].allow(asked[c.ID()], kicked); bad != "" {
			fail("server: client %d left (%v): %s", c.ID(), why, bad)
		}
		delete(asked, c.ID())
	}
	core, err := server.New(server.Config{
		ProtocolID: protocolID,
		PrivateKey: privateKey,
		MaxClients: actors,
		Addrs:      []netip.AddrPort{srvAP},
		Now:        w.now,
	})
	require.NoError(t, err)
	ev := events{h: srv}
	ssink := sink{w, srvAP}
	var sout server.Output // the core's calls report here
	flush := func() {
		for _, m := range sout.Datagrams {
			ssink.Send(m.Addr, m.Buf)
		}
		sout.Reset()
	}

	as := make([]*soakActor, actors)
	byAddr := map[netip.AddrPort]*soakActor{}
	for i := range as {
		a := &soakActor{addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 2, byte(i >> 8), byte(i)}), 6000)}
		a.sink = sink{w, a.addr}
		a.reference = i%4 == 3
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
		a.core = client.New(w.now, w.tokenFor(a.id, soakTokenExpiry, 5, srvAddr), nil)
		a.states = append(a.states[:0], a.core.State())
	}
	// settle judges a session that ended.
	settle := func(a *soakActor) {
		st := a.core.State()
		e := soakEnd{left: a.wantOff, reference: a.reference}
		if at, ok := kickedAt[a.id]; ok {
			e.kicked, e.kickSeen = true, w.now.Sub(at)
		}
		rule, listed := clientEnds[st]
		how := st.String()
		switch {
		case e.left:
			how += ", left"
		case e.kicked:
			how += ", kicked"
		}
		if a.reference {
			how += ", reference-like"
		}
		ends[how]++
		switch {
		case !listed:
			fail("client %d (gen %d) ended in %v, which the oracle does not list; path %v", a.id, a.gen, st, a.states)
		default:
			if bad := rule.allow(e); bad != "" {
				fail("client %d (gen %d) ended in %v: %s; path %v", a.id, a.gen, st, bad, a.states)
			}
		}
		a.core = nil
	}
	payload := make([]byte, 64)
	var scratch []byte
	// advance moves simulated time one tick: deliver, echo, update timers.
	advance := func() {
		w.now = w.now.Add(tick)
		w.net.Deliver(w.now, func(from, to netip.AddrPort, b []byte) {
			scratch = append(scratch[:0], b...) // decrypted in place
			if to == srvAP {
				ev.connected(core.Receive(w.now, from, scratch, &sout))
				flush()
			} else if a := byAddr[to]; a != nil && a.core != nil && !(a.reference && ignoredByReference(scratch, a.core.State())) {
				a.core.Receive(w.now, from, scratch, &a.out)
				a.apply()
			}
		})
		ev.collect()
		for _, e := range srv.echo {
			err := e.c.Send(w.now, e.p, &sout)
			flush()
			if err != nil && !errors.Is(err, server.ErrClientGone) {
				fail("echo: %v", err) // ErrClientGone is fine: it left meanwhile
			}
		}
		srv.echo = srv.echo[:0]
		core.Update(w.now, &sout)
		flush()
		ev.collect()
		for _, a := range as {
			if a.core != nil {
				a.core.Update(w.now, &a.out)
				a.apply()
			}
		}
	}
	report, started := w.now.Add(soakReportEvery), time.Now()
	for end := w.now.Add(simulated); w.now.Before(end); {
		advance()
		if !w.now.Before(report) {
			report = report.Add(soakReportEvery)
			t.Logf("seed %d: %v simulated, %d sessions, %d kicks, %d failures so far (%v of wall time)",
				seed, w.now.Sub(epoch), sessions, kicks, failures, time.Since(started).Round(time.Second))
		}
		// The server kicks a random client now and then.
		if rng.IntN(200) == 0 && len(srv.order) > 0 {
			c := srv.order[rng.IntN(len(srv.order))]
			kickedAt[c.ID()] = w.now
			core.Disconnect(c, &sout)
			flush()
			ev.collect() // the server's side of the kick, before the client's is judged
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
					require.NoError(t, a.core.Send(w.now, payload[:16+rng.IntN(48)], &a.out))
					a.apply()
					a.sent++
				}
				if !w.now.Before(a.next) && rng.IntN(500) == 0 {
					a.wantOff = true
					asked[a.id] = true
					a.core.Disconnect(&a.out)
					a.apply()
					leaves++
				}
			case st <= client.Disconnected:
				settle(a)
				delete(kickedAt, a.id)
				a.next = w.now.Add(time.Duration(200+rng.IntN(3000)) * time.Millisecond)
			}
		}
	}
	// Everyone leaves; the server must free every slot. First the
	// handshakes under way finish: a client that gives up in the middle of
	// one may see its last response overtake its disconnects and leave the
	// server a connection to time out (in the reference too); that is not
	// what the soak tests.
	handshaking := func() bool {
		busy := false
		for _, a := range as {
			if a.core == nil {
				continue
			}
			switch st := a.core.State(); {
			case st <= client.Disconnected:
				settle(a)
				delete(kickedAt, a.id)
			case st != client.Connected:
				busy = true
			}
		}
		return busy
	}
	for limit := w.now.Add(10 * time.Second); handshaking(); advance() {
		require.True(t, w.now.Before(limit), "handshakes still under way 10 s after the end")
	}
	for _, a := range as {
		if a.core != nil {
			a.wantOff = true
			asked[a.id] = true
			a.core.Disconnect(&a.out)
			a.apply()
			settle(a)
		}
	}
	for range 200 {
		advance()
	}

	t.Logf("seed %d: simulated %v: %d sessions, %d client leaves, %d server kicks, server saw %d opened, left %v; clients ended %v; network %+v",
		seed, simulated, sessions, leaves, kicks, srv.opened, srv.left, ends, w.net.Stats())
	require.Zero(t, failures, "sessions ended other than by the rules")
	require.Zero(t, srv.badData, "payloads delivered on the wrong server connection")
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
