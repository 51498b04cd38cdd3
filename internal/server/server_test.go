package server

import (
	"net/netip"
	"testing"
	"time"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/testing/tokentest"
	"github.com/gonetcode/netcode/protocol"
	"github.com/gonetcode/netcode/token"
	"github.com/stretchr/testify/require"
)

const protocolID = 0x1122334455667788

var (
	epoch   = time.Unix(1_800_000_000, 0)
	privKey = crypto.Key{0: 7, 31: 7}
	self    = netip.MustParseAddrPort("10.0.0.1:40000")
	other   = netip.MustParseAddrPort("10.0.0.2:40000")
)

// countSink counts the datagrams sent.
type countSink struct{ Output }

func (s *countSink) n() int { return len(s.Datagrams) }

// request returns a connection request packet carrying a token for server.
func request(t *testing.T, server netip.AddrPort) []byte {
	t.Helper()
	tok, err := tokentest.GenerateWith(token.Params{
		ProtocolID:     protocolID,
		ClientID:       5,
		PrivateKey:     privKey,
		ServerAddrs:    []netip.AddrPort{server},
		ExpireSeconds:  60,
		TimeoutSeconds: 5,
	}, uint64(epoch.Unix()), [crypto.TokenNonceBytes]byte{1}, crypto.Key{1: 1}, crypto.Key{1: 2})
	require.NoError(t, err)
	ct, err := token.Parse(tok)
	require.NoError(t, err)
	return protocol.AppendConnectionRequest(nil, ct.ProtocolID, ct.ExpireTimestamp, &ct.Nonce, ct.PrivateData[:])
}

// TestRefusedInputAllocatesNothing: what a hostile sender can make the
// server refuse costs no allocation, with the default silent logger.
func TestRefusedInputAllocatesNothing(t *testing.T) {
	forOther := request(t, other)
	reused := request(t, self)
	tests := []struct {
		name  string
		pkt   []byte
		from  netip.AddrPort
		setup func(s *Server) // runs once before measuring
		stat  func(st Stats) uint64
		once  bool // counted once, not per request (a token's reuse)
	}{
		{
			name: "token for another server",
			pkt:  forOther,
			from: netip.MustParseAddrPort("10.9.0.1:1000"),
			stat: func(st Stats) uint64 { return st.AddressNotInToken },
		},
		{
			name: "token already used from another address",
			pkt:  reused,
			from: netip.MustParseAddrPort("10.9.0.2:1000"),
			setup: func(s *Server) {
				s.Receive(epoch, netip.MustParseAddrPort("10.9.0.3:1000"), append([]byte(nil), reused...), &Output{})
			},
			stat: func(st Stats) uint64 { return st.TokenReuseRefused },
			once: true,
		},
		{
			name: "new token with the history full",
			pkt:  requestOf(t, tokenWith(t, privKey, 1<<20, epoch)),
			from: netip.MustParseAddrPort("10.9.0.5:1000"),
			setup: func(s *Server) {
				fillHistory(t, s, 0, 64, epoch)
			},
			stat: func(st Stats) uint64 { return st.HistoryFull },
		},
		{
			name: "garbage",
			pkt:  append([]byte{0x15}, make([]byte, 40)...),
			from: netip.MustParseAddrPort("10.9.0.4:1000"),
			stat: func(st Stats) uint64 { return st.Ignored },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(Config{ProtocolID: protocolID, PrivateKey: privKey, MaxClients: 4, Addrs: []netip.AddrPort{self}, Now: epoch, History: 64})
			require.NoError(t, err)
			if tt.setup != nil {
				tt.setup(s)
			}
			buf := make([]byte, len(tt.pkt))
			sink := &countSink{}
			allocs := testing.AllocsPerRun(100, func() {
				copy(buf, tt.pkt) // Receive decrypts in place
				s.Receive(epoch, tt.from, buf, &sink.Output)
			})
			require.Zero(t, allocs)
			require.Zero(t, sink.n(), "answered refused input")
			if tt.once {
				require.Equal(t, uint64(1), tt.stat(s.Stats()), "counted once")
			} else {
				require.GreaterOrEqual(t, tt.stat(s.Stats()), uint64(100), "refused for another reason")
			}
		})
	}
}
