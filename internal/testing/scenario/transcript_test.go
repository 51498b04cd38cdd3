package scenario

import (
	"encoding/hex"
	"net/netip"
	"testing"
	"time"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/client"
	"github.com/gonetcode/netcode/internal/server"
	"github.com/gonetcode/netcode/internal/testing/vectortest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The reference's handshake transcript: the packets a real C client and
// server exchanged. Our cores, fed the other side's packets at the same
// times, must write the same bytes.

type transcriptPacket struct {
	Index  int     `json:"index"`
	From   string  `json:"from"`
	Time   float64 `json:"time"`
	Type   int     `json:"packet_type"`
	Packet string  `json:"packet"`
}

type transcript struct {
	ClientAddress string             `json:"client_address"`
	ServerAddress string             `json:"server_address"`
	MaxClients    int                `json:"max_clients"`
	ChallengeKey  string             `json:"challenge_key"`
	Packets       []transcriptPacket `json:"packets"`
	token         []byte
	privateKey    crypto.Key
}

func loadTranscript(t *testing.T) *transcript {
	t.Helper()
	var doc struct {
		Common struct {
			PrivateKey string `json:"private_key"`
		} `json:"common_inputs"`
		Tokens []struct {
			Name         string `json:"name"`
			ConnectToken string `json:"connect_token"`
		} `json:"connect_tokens"`
		Transcript transcript `json:"handshake_transcript"`
	}
	require.NoError(t, vectortest.Load(vectortest.Path("netcode-1.02.json"), &doc))
	tr := doc.Transcript
	for _, tk := range doc.Tokens {
		if tk.Name == "handshake" {
			tr.token = unhex(t, tk.ConnectToken)
		}
	}
	require.NotNil(t, tr.token)
	copy(tr.privateKey[:], unhex(t, doc.Common.PrivateKey))
	require.Len(t, tr.Packets, 20)
	return &tr
}

func unhex(t *testing.T, s string) []byte {
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	return b
}

func (tr *transcript) at(sec float64) time.Time {
	return epoch.Add(time.Duration(sec * float64(time.Second)))
}

func (tr *transcript) packet(t *testing.T, i int) []byte { return unhex(t, tr.Packets[i].Packet) }

// recSink records what a core sends: a client core's datagrams through
// Send, a server core's in the Output its calls append to.
type recSink struct {
	server.Output
	pkts [][]byte
}

func (r *recSink) Send(_ netip.AddrPort, b []byte) {
	r.pkts = append(r.pkts, append([]byte(nil), b...))
}

// take returns what was sent, in order, and forgets it.
func (r *recSink) take() [][]byte {
	p := r.pkts
	for _, m := range r.Datagrams {
		p = append(p, append([]byte(nil), m.Buf...))
	}
	r.pkts = nil
	r.Reset()
	return p
}

func TestTranscriptServerSide(t *testing.T) {
	tr := loadTranscript(t)
	cliAddr := netip.MustParseAddrPort(tr.ClientAddress)
	srvAddr := netip.MustParseAddrPort(tr.ServerAddress)
	var ck crypto.Key
	copy(ck[:], unhex(t, tr.ChallengeKey))
	h := &srvNode{left: map[*server.Client]server.Reason{}, payloads: map[*server.Client][][]byte{}}
	s, err := server.New(server.Config{
		ProtocolID:         0x1122334455667788,
		PrivateKey:         tr.privateKey,
		MaxClients:         tr.MaxClients,
		Addrs:              []netip.AddrPort{srvAddr},
		ChallengeKey:       ck,
		ReferenceSequences: true,
		Now:                tr.at(0),
	})
	require.NoError(t, err)
	ev := events{h: h}
	var out recSink
	recv := func(i int) {
		p := tr.Packets[i]
		require.Equal(t, "client", p.From)
		ev.connected(s.Receive(tr.at(p.Time), cliAddr, tr.packet(t, i), &out.Output))
		ev.collect()
	}
	expect := func(got [][]byte, idx ...int) {
		t.Helper()
		require.Len(t, got, len(idx))
		for k, i := range idx {
			assert.Equal(t, tr.Packets[i].Packet, hex.EncodeToString(got[k]), "packet %d", i)
		}
	}

	recv(0) // request → challenge
	expect(out.take(), 1)
	recv(2) // response → connected, first keep-alive
	expect(out.take(), 3)
	require.Len(t, h.connected, 1)
	sc := h.connected[0]
	assert.Equal(t, 0, sc.Index())
	assert.Equal(t, uint64(0x0123456789abcdef), sc.ID())
	// Not yet confirmed: a keep-alive goes before the payload.
	require.NoError(t, sc.Send(tr.at(0.2), []byte("hello from server!!!"), &out.Output))
	expect(out.take(), 4, 5)
	recv(6) // the client's payload confirms the connection
	require.Len(t, h.payloads[sc], 1)
	require.NoError(t, sc.Send(tr.at(0.25), h.payloads[sc][0], &out.Output))
	expect(out.take(), 7)
	recv(8)
	s.Update(tr.at(0.5), &out.Output)
	expect(out.take(), 9)
	for i := 10; i < 20; i++ {
		recv(i)
	}
	assert.Equal(t, server.ReasonPeerDisconnected, h.left[sc])
	assert.Empty(t, out.take())
}

func TestTranscriptClientSide(t *testing.T) {
	tr := loadTranscript(t)
	srvAddr := netip.MustParseAddrPort(tr.ServerAddress)
	var out recSink
	h := &cliNode{}
	h.start(&world{now: tr.at(0)}, tr.token)
	c := h.core
	c.SetSequence(0) // the reference client counts from 0
	require.Equal(t, client.SendingConnectionRequest, c.State())
	recv := func(i int) {
		p := tr.Packets[i]
		require.Equal(t, "server", p.From)
		c.Receive(tr.at(p.Time), srvAddr, tr.packet(t, i), &h.out)
		h.apply(&out)
	}
	update := func(sec float64) {
		c.Update(tr.at(sec), &h.out)
		h.apply(&out)
	}
	expect := func(got [][]byte, idx ...int) {
		t.Helper()
		require.Len(t, got, len(idx))
		for k, i := range idx {
			assert.Equal(t, tr.Packets[i].Packet, hex.EncodeToString(got[k]), "packet %d", i)
		}
	}
	update(0)
	expect(out.take(), 0)
	recv(1)
	assert.Equal(t, client.SendingConnectionResponse, c.State())
	update(0.2)
	expect(out.take(), 2)
	recv(3)
	assert.Equal(t, client.Connected, c.State())
	assert.Equal(t, 0, c.ClientIndex())
	assert.Equal(t, tr.MaxClients, c.MaxClients())
	recv(4)
	recv(5)
	require.Len(t, h.payloads, 1)
	assert.Equal(t, "hello from server!!!", string(h.payloads[0]))
	payload := make([]byte, 100)
	for i := range payload {
		payload[i] = byte(i*31 + 7)
	}
	require.NoError(t, c.Send(tr.at(0.25), payload, &h.out))
	h.apply(&out)
	expect(out.take(), 6)
	recv(7)
	require.Len(t, h.payloads, 2)
	assert.Equal(t, payload, h.payloads[1])
	update(0.5)
	expect(out.take(), 8)
	recv(9)
	c.Disconnect(&h.out)
	h.apply(&out)
	expect(out.take(), 10, 11, 12, 13, 14, 15, 16, 17, 18, 19)
	assert.Equal(t, client.Disconnected, c.State())
}
