package core

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gonetcode/netcode/cute/internal/hydro"
	"github.com/gonetcode/netcode/cute/internal/wire"
	"github.com/gonetcode/netcode/internal/testing/vectortest"
	"github.com/stretchr/testify/require"
)

type hx = vectortest.Hex

// tEvent is one entry of a transcript's events: a datagram (Index set) or
// a state change, server event, application call or note.
type tEvent struct {
	Index      *int   `json:"index"`
	Kind       string `json:"kind"`
	Step       int    `json:"step"`
	Who        string `json:"who"`
	Text       string `json:"text"`
	SentDuring string `json:"sent_during"`
	From, To   json.RawMessage
	Delivered  bool            `json:"delivered"`
	Bytes      hx              `json:"bytes"`
	Type       wire.Type       `json:"packet_type"`
	Draws      json.RawMessage `json:"rng_draws_since_previous_datagram"`
	Decoded    json.RawMessage `json:"decoded"`
	// Server events.
	Event       string `json:"event"`
	ClientIndex int    `json:"client_index"`
	ClientID    uint64 `json:"client_id"`
	Payload     hx     `json:"payload"`
	Size        int    `json:"size"`
	Sequence    uint64 `json:"sequence"`
}

type transcript struct {
	Name  string
	Clock struct {
		Dt     float64
		T0Unix int64 `json:"t0_unix"`
	}
	Parameters struct {
		ApplicationID uint64 `json:"application_id"`
		PK            hx     `json:"server_signing_public_key"`
		SK            hx     `json:"server_signing_secret_key"`
		Timeout       uint32 `json:"server_connection_timeout"`
	}
	Clients []struct {
		Name    string
		Address string
		Token   hx `json:"connect_token"`
	}
	Events []tEvent
	Steps  []struct {
		Step        int
		ClientState map[string]State `json:"client_state"`
		ServerCount int              `json:"server_client_count"`
	}
	Datagrams int `json:"datagrams_recorded"`
}

// deviations are the recorded datagrams the Go server deliberately does
// not send, by transcript and datagram index, with the reason.
var deviations = map[string]map[int]string{
	"server_full_connection_denied": {
		2: "a challenge request to the address just denied", 3: "", 4: "", 5: "", 6: "", 7: "", 8: "", 9: "", 10: "",
	},
}

// draws decodes a datagram's recorded RNG draws (a JSON list, or the
// Python repr of one).
func (e *tEvent) draws(t *testing.T) [][]byte {
	var list []string
	if err := json.Unmarshal(e.Draws, &list); err != nil {
		var s string
		require.NoError(t, json.Unmarshal(e.Draws, &s))
		list = regexp.MustCompile(`[0-9a-f]+`).FindAllString(s, -1)
	}
	var out [][]byte
	for _, h := range list {
		b, err := hex.DecodeString(h)
		require.NoError(t, err)
		out = append(out, b)
	}
	return out
}

func (e *tEvent) decodedPayload(t *testing.T) []byte {
	var d struct{ Payload string }
	require.NoError(t, json.Unmarshal(e.Decoded, &d))
	b, err := hex.DecodeString(d.Payload)
	require.NoError(t, err)
	return b
}

func str(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// sent is a datagram a core produced.
type sent struct {
	step     int
	from, to netip.AddrPort
	b        []byte
}

// TestTranscripts replays the 7 recorded runs against the cores: every
// datagram byte for byte at its recorded step, the client's state at every
// step, the server's client count and events.
func TestTranscripts(t *testing.T) {
	var v struct{ Transcripts []transcript }
	require.NoError(t, vectortest.LoadCute(vectortest.CutePath("transcript.json"), &v))
	require.Len(t, v.Transcripts, 7)
	passed := 0
	for i := range v.Transcripts {
		tr := &v.Transcripts[i]
		t.Run(tr.Name, func(t *testing.T) {
			replay(t, tr)
			passed++
		})
	}
	t.Logf("transcripts %d/%d", passed, len(v.Transcripts))
}

func replay(t *testing.T, tr *transcript) {
	require.Len(t, tr.Clients, 1)
	serverAddr := netip.MustParseAddrPort("127.0.0.1:5000")
	clientAddr := netip.MustParseAddrPort(tr.Clients[0].Address)
	dev := deviations[tr.Name]

	// The expected datagrams, the recorded draws the Go cores make (hash
	// table keys are the C server's own), and the script.
	var want []*tEvent
	src := &scripted{}
	for i := range tr.Events {
		e := &tr.Events[i]
		if e.Index == nil {
			continue
		}
		if _, skip := dev[*e.Index]; skip {
			continue
		}
		want = append(want, e)
		for _, d := range e.draws(t) {
			if len(d) != 32 {
				src.draws = append(src.draws, d)
			}
		}
	}
	require.Len(t, want, tr.Datagrams-len(dev))

	hasServer, serverTimeout := false, uint32(0)
	for _, e := range tr.Events {
		if m := regexp.MustCompile(`cn_protocol_server_start\(.*connection_timeout=(\d+)\)`).FindStringSubmatch(e.Text); m != nil {
			hasServer = true
			n, _ := strconv.Atoi(m[1])
			serverTimeout = uint32(n)
		}
	}
	at := func(step int) time.Time {
		return time.Unix(tr.Clock.T0Unix, 0).Add(time.Duration(float64(step) * tr.Clock.Dt * float64(time.Second)))
	}
	require.Equal(t, 0.0625, tr.Clock.Dt)

	var srv *Server
	filler := &scripted{seed: [hydro.SeedBytes]byte{0xf1}}
	if hasServer {
		var err error
		srv, err = NewServer(at(0), ServerConfig{
			ApplicationID:     tr.Parameters.ApplicationID,
			PublicKey:         [32]byte(tr.Parameters.PK),
			SecretKey:         [64]byte(tr.Parameters.SK),
			Addrs:             []netip.AddrPort{serverAddr},
			ConnectionTimeout: time.Duration(serverTimeout) * time.Second,
			History:           NewHistory(1024, 0),
		})
		require.NoError(t, err)
		srv.setEntropy(src.read)
	}
	var cli *Client
	connect := func(step int) {
		var err error
		cli, err = NewClient(at(step), tr.Clients[0].Token, tr.Parameters.ApplicationID)
		require.NoError(t, err)
		cli.setEntropy(src.read)
	}

	// Fillers: 32 Go clients that take every slot (server_full).
	type fillerClient struct {
		c    *Client
		addr netip.AddrPort
	}
	var fillers []fillerClient
	if strings.HasPrefix(tr.Name, "server_full") {
		srv.setEntropy(filler.read)
		for i := range DefaultMaxClients {
			var tok [wire.TokenBytes]byte
			p := &wire.TokenParams{
				ApplicationID: tr.Parameters.ApplicationID, Created: uint64(tr.Clock.T0Unix), Expires: uint64(tr.Clock.T0Unix) + 60,
				HandshakeTimeout: 5, Endpoints: []netip.AddrPort{serverAddr}, ClientID: 1000 + uint64(i),
			}
			p.ClientToServer[0], p.ServerToClient[0] = byte(i), byte(i+100)
			require.NoError(t, wire.WriteToken(&tok, p, (*[64]byte)(tr.Parameters.SK), &wire.IV{byte(i)}, &[32]byte{byte(i)}))
			c, err := NewClient(at(0), tok[:], tr.Parameters.ApplicationID)
			require.NoError(t, err)
			c.setEntropy(filler.read)
			fillers = append(fillers, fillerClient{c, netip.AddrPortFrom(clientAddr.Addr(), uint16(51000+i))})
		}
	}

	// The script: application calls by step.
	apps := map[int][]*tEvent{}
	for i := range tr.Events {
		if e := &tr.Events[i]; e.Kind == "app" && e.Step > 0 || e.Kind == "app" && strings.HasPrefix(e.Text, "cn_protocol_client_connect") {
			apps[e.Step] = append(apps[e.Step], e)
		}
	}
	for _, e := range apps[0] {
		if strings.HasPrefix(e.Text, "cn_protocol_client_connect") {
			connect(0)
		}
	}

	var got []sent
	toServer := []sent{}
	toClient := map[netip.AddrPort][]sent{}
	serverStopped := false
	var gotServerEvents []string
	var cout ClientOutput
	var sout ServerOutput
	route := func(step int, from netip.AddrPort, out []sentMsg) {
		for _, m := range out {
			d := sent{step, from, m.addr, append([]byte(nil), m.b...)}
			if from == clientAddr || m.addr == clientAddr {
				got = append(got, sent{step, from, m.addr, append([]byte(nil), m.b...)})
			}
			if m.addr == serverAddr {
				toServer = append(toServer, d)
			} else {
				toClient[m.addr] = append(toClient[m.addr], d)
			}
		}
	}
	var gotPayloads []string
	runClient := func(step int, c *Client, addr netip.AddrPort) {
		now := at(step)
		for _, d := range toClient[addr] {
			c.Receive(now, d.from, d.b, &cout)
			route(step, addr, msgs(cout.datagrams))
			if cout.Payload != nil && c == cli {
				gotPayloads = append(gotPayloads, fmt.Sprintf("%d %d %x", step, cout.Sequence, cout.Payload))
			}
		}
		toClient[addr] = nil
		c.Update(now, &cout)
		route(step, addr, msgs(cout.datagrams))
	}
	var payloadEvents []Event
	lastStep := tr.Steps[len(tr.Steps)-1].Step
	for step := 1; step <= lastStep; step++ {
		now := at(step)
		if cli != nil && cli.State() > Disconnected {
			runClient(step, cli, clientAddr)
		} else {
			toClient[clientAddr] = nil // a closed socket
		}
		for _, f := range fillers {
			runClient(step, f.c, f.addr)
		}
		if srv != nil && !serverStopped {
			if len(fillers) > 0 && step == 3 {
				srv.setEntropy(src.read)
			}
			payloadEvents = payloadEvents[:0]
			for _, d := range toServer {
				srv.Receive(now, d.from, d.b, &sout)
				route(step, serverAddr, msgs(sout.datagrams))
				for _, e := range sout.Events {
					if e.Addr == clientAddr {
						gotServerEvents = append(gotServerEvents, describe(step, e))
					}
					if e.Kind == EventPayload {
						e.Payload = append([]byte(nil), e.Payload...)
						payloadEvents = append(payloadEvents, e)
					}
				}
			}
			toServer = toServer[:0]
			srv.Update(now, &sout)
			route(step, serverAddr, msgs(sout.datagrams))
			for _, e := range sout.Events {
				if e.Addr == clientAddr {
					gotServerEvents = append(gotServerEvents, describe(step, e))
				}
			}
		} else {
			toServer = toServer[:0]
		}

		for _, e := range apps[step] {
			switch {
			case strings.HasPrefix(e.Text, "cn_protocol_client_connect"):
				// After the step's record (see below).
			case strings.HasPrefix(e.Text, "cn_protocol_server_send_to_client"):
				p := nextAppPayload(t, tr, want, "server (app)", &got)
				require.NoError(t, srv.Send(now, 0, p, &sout))
				route(step, serverAddr, msgs(sout.datagrams))
			case strings.HasPrefix(e.Text, "cn_protocol_client_send"):
				p := nextAppPayload(t, tr, want, "client (app)", &got)
				require.NoError(t, cli.Send(now, p, &cout))
				route(step, clientAddr, msgs(cout.datagrams))
			case strings.HasPrefix(e.Text, "cn_protocol_client_disconnect"):
				cli.Disconnect(now, &cout)
				route(step, clientAddr, msgs(cout.datagrams))
			case strings.HasPrefix(e.Text, "cn_protocol_server_disconnect_client"):
				require.NoError(t, srv.Disconnect(now, 0, true, &sout))
				route(step, serverAddr, msgs(sout.datagrams))
				// The C server queues the event; the driver pops it at
				// the next step's drain.
				for _, e := range sout.Events {
					gotServerEvents = append(gotServerEvents, describe(step+1, e))
				}
			case strings.HasPrefix(e.Text, "server stops"):
				serverStopped = true
			default:
				t.Fatalf("unknown application call %q", e.Text)
			}
		}
		// The recorded per-step state, after the step's application calls
		// but before a connect made in it.
		for _, s := range tr.Steps {
			if s.Step != step {
				continue
			}
			st := Disconnected
			if cli != nil {
				st = cli.State()
			}
			require.Equal(t, s.ClientState["client"], st, "client state at step %d", step)
			if srv != nil {
				require.Equal(t, s.ServerCount, srv.ClientCount(), "server client count at step %d", step)
			}
		}

		for _, e := range apps[step] {
			if strings.HasPrefix(e.Text, "cn_protocol_client_connect") {
				connect(step)
			}
		}
		// The server echoes each payload (in the first transcript).
		if hasEcho(tr) {
			for _, e := range payloadEvents {
				require.NoError(t, srv.Send(now, e.Index, e.Payload, &sout))
				route(step, serverAddr, msgs(sout.datagrams))
			}
		}
		payloadEvents = payloadEvents[:0]
	}

	// Every datagram, byte for byte, at its step, between the right ends.
	for i, w := range want {
		require.Less(t, i, len(got), "datagram %d (%s at step %d) was not sent", *w.Index, w.Type, w.Step)
		g := got[i]
		require.Equal(t, w.Step, g.step, "datagram %d (%s) step", *w.Index, w.Type)
		require.Equal(t, str(w.From), g.from.String(), "datagram %d from", *w.Index)
		require.Equal(t, str(w.To), g.to.String(), "datagram %d to", *w.Index)
		require.Equal(t, hex.EncodeToString(w.Bytes), hex.EncodeToString(g.b), "datagram %d (%s) bytes", *w.Index, w.Type)
	}
	require.Len(t, got, len(want), "extra datagrams")
	require.Zero(t, src.misfits, "draws out of order")
	require.Empty(t, src.draws, "recorded draws left over")

	var wantServerEvents, wantPayloads []string
	for _, e := range tr.Events {
		switch e.Kind {
		case "server_event":
			wantServerEvents = append(wantServerEvents, fmt.Sprintf("%d %s %d", e.Step, e.Event, e.ClientIndex))
		case "client_payload":
			wantPayloads = append(wantPayloads, fmt.Sprintf("%d %d %x", e.Step, e.Sequence, []byte(e.Payload)))
		}
	}
	require.Equal(t, wantServerEvents, gotServerEvents)
	require.Equal(t, wantPayloads, gotPayloads)
}

func hasEcho(tr *transcript) bool {
	for _, e := range tr.Events {
		if strings.Contains(e.Text, "server echoes each payload back") {
			return true
		}
	}
	return false
}

// describe writes a server event as the transcript's are compared.
func describe(step int, e Event) string {
	name := map[EventKind]string{EventConnected: "NEW_CONNECTION", EventPayload: "PAYLOAD_PACKET", EventDisconnected: "DISCONNECTED"}[e.Kind]
	return fmt.Sprintf("%d %s %d", step, name, e.Index)
}

// nextAppPayload returns the payload of the next expected datagram sent by
// an application call of kind who that has not been produced yet.
func nextAppPayload(t *testing.T, tr *transcript, want []*tEvent, who string, got *[]sent) []byte {
	for i, w := range want {
		if i >= len(*got) && w.SentDuring == who && w.Type == wire.Payload {
			return w.decodedPayload(t)
		}
	}
	t.Fatalf("%s: no %s payload left", tr.Name, who)
	return nil
}

type sentMsg struct {
	addr netip.AddrPort
	b    []byte
}

func msgs(d datagrams) []sentMsg {
	var out []sentMsg
	for _, m := range d.Datagrams {
		out = append(out, sentMsg{m.Addr, m.Buf})
	}
	return out
}
