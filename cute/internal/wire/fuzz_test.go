package wire

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/gonetcode/netcode/cute/internal/hydro"
)

var (
	fuzzSK [hydro.SecretKeyBytes]byte
	fuzzPK [hydro.PublicKeyBytes]byte
)

func init() { hydro.KeyPairDeterministic(&fuzzSK, &fuzzPK, &[hydro.SeedBytes]byte{7}) }

func fuzzToken(f *testing.F) [TokenBytes]byte {
	var tok [TokenBytes]byte
	p := &TokenParams{
		ApplicationID: 5, Created: 100, Expires: 200, HandshakeTimeout: 5, ClientID: 9,
		Endpoints: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:5000"), netip.MustParseAddrPort("[::1]:5001")},
	}
	if err := WriteToken(&tok, p, &fuzzSK, &IV{1}, &[32]byte{2}); err != nil {
		f.Fatal(err)
	}
	return tok
}

// FuzzReadServerToken: never panics, and whatever it accepts carries a
// signature by the key, so only bytes the key signed are accepted.
func FuzzReadServerToken(f *testing.F) {
	tok := fuzzToken(f)
	f.Add(tok[RESTBytes:], uint64(150))
	f.Add(make([]byte, TokenPacketBytes), uint64(0))
	f.Add([]byte{0}, uint64(0))
	f.Fuzz(func(t *testing.T, pkt []byte, now uint64) {
		var st ServerToken
		if ReadServerToken(pkt, &fuzzPK, &fuzzSK, 5, now, &st) == nil {
			if !bytes.Equal(pkt, tok[RESTBytes:]) {
				t.Fatal("accepted a token the key did not make")
			}
			if st.ClientID != 9 || now >= 200 {
				t.Fatalf("accepted with client id %d at %d", st.ClientID, now)
			}
		}
	})
}

// FuzzReadClientToken: never panics; an accepted token's endpoints are
// valid addresses.
func FuzzReadClientToken(f *testing.F) {
	tok := fuzzToken(f)
	f.Add(tok[:], uint64(0))
	bad := tok
	bad[RESTBytes+31] = 32 // endpoint count past the section
	f.Add(bad[:], uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, now uint64) {
		var ct ClientToken
		if ReadClientToken(b, 5, now, &ct) == nil {
			if len(ct.Endpoints) < 1 || len(ct.Endpoints) > MaxEndpoints || ct.Created > ct.Expires || ct.Expires < now {
				t.Fatalf("accepted %+v", ct)
			}
			for _, e := range ct.Endpoints {
				if !e.IsValid() {
					t.Fatal("accepted an invalid endpoint")
				}
			}
		}
	})
}

// FuzzOpen: the packet reader never panics, only opens packets sealed
// with its key, and never returns a payload longer than the maximum.
func FuzzOpen(f *testing.F) {
	var key Key
	key[0] = 3
	pk := packetKey(key[:])
	for _, b := range [][]byte{
		AppendEmpty(nil, KeepAlive, 1, pk, &IV{}),
		AppendAccepted(nil, 2, pk, &IV{}, 7, 32, 10),
		AppendChallenge(nil, ChallengeRequest, 3, pk, &IV{}, 4, &[ChallengeDataBytes]byte{}),
		AppendPayload(nil, 4, pk, &IV{}, []byte("hello")),
		AppendPayload(nil, 5, pk, &IV{}, nil),
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Replay
		var p Packet
		data := bytes.Clone(b)
		if Open(data, pk, &r, &p) == nil {
			if len(p.Payload) > MaxPayloadBytes || (p.Type == Payload && len(p.Payload)+HeaderBytes+2 != len(b)) {
				t.Fatalf("payload of %d bytes from %d", len(p.Payload), len(b))
			}
			if Open(bytes.Clone(b), pk, &r, &p) == nil {
				t.Fatal("the same packet opened twice with one replay buffer")
			}
		}
	})
}
