package protocol

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/gonetcode/netcode/crypto"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// forgeries turn a valid encrypted packet into one that does not
// authenticate, keeping its prefix byte and sequence number.
var forgeries = []struct {
	name  string
	forge func(pkt []byte, seq uint64) []byte
}{
	{"tampered MAC", func(pkt []byte, _ uint64) []byte {
		pkt[len(pkt)-1] ^= 0x01
		return pkt
	}},
	{"tampered ciphertext", func(pkt []byte, seq uint64) []byte {
		pkt[1+sequenceBytes(seq)] ^= 0x80
		return pkt
	}},
	{"other key", func(pkt []byte, seq uint64) []byte {
		_, s2c := testKeys()
		return AppendPayload(nil, s2c, seq, pkt[1+sequenceBytes(seq):len(pkt)-crypto.MACBytes])
	}},
	{"other packet's sequence", func(pkt []byte, seq uint64) []byte {
		// A packet sealed under another sequence of the same length, its
		// header rewritten to claim seq.
		c2s, _ := testKeys()
		other := AppendPayload(nil, c2s, seq^1, []byte("other packet"))
		copy(other[1:1+sequenceBytes(seq)], pkt[1:1+sequenceBytes(seq)])
		return other
	}},
}

// The replay check comes before decryption, as in the reference: a packet
// whose sequence was already received is refused as replayed without being
// opened, whatever it holds, so that a flood of replays costs no crypto.
func TestReplayCheckedBeforeDecryption(t *testing.T) {
	c2s, _ := testKeys()
	server := Reader{ProtocolID: testProtocolID, Allowed: ServerAccepts}
	for _, seq := range []uint64{0, 7, 1 << 40} {
		for _, f := range forgeries {
			t.Run(fmt.Sprintf("seq %d/%s", seq, f.name), func(t *testing.T) {
				var rp ReplayProtection
				var p Packet
				require.NoError(t, server.Read(AppendPayload(nil, c2s, seq, []byte("real")), 0, c2s, &rp, &p))
				require.Equal(t, "real", string(p.Payload))

				forged := f.forge(AppendPayload(nil, c2s, seq, []byte("fake")), seq)
				// Without replay protection the forgery fails to decrypt...
				require.Equal(t, ErrDecrypt, server.Read(bytes.Clone(forged), 0, c2s, nil, &p))
				// ...with it, the replay check refuses it first.
				assert.Equal(t, ErrReplayed, server.Read(forged, 0, c2s, &rp, &p))
				assert.Equal(t, seq, rp.mostRecent)
			})
		}
	}
}

// A packet that fails to decrypt leaves the replay window as it was: it can
// neither take the sequence it claims from the real packet nor push the
// window past packets still to come.
func TestForgeryDoesNotAdvanceReplay(t *testing.T) {
	c2s, _ := testKeys()
	server := Reader{ProtocolID: testProtocolID, Allowed: ServerAccepts}
	const last = 1000 // the last sequence received before the forgery
	tests := []struct {
		name string
		seq  uint64 // the forgery's sequence, then the real packet's
	}{
		{"next", last + 1},
		{"gap", last + 10},
		{"out of order", last - 1},
		{"past the window", last + 10*replayWindow},
	}
	for _, tc := range tests {
		for _, f := range forgeries {
			t.Run(tc.name+"/"+f.name, func(t *testing.T) {
				var rp ReplayProtection
				var p Packet
				require.NoError(t, server.Read(AppendPayload(nil, c2s, last, []byte("before")), 0, c2s, &rp, &p))
				before := rp

				forged := f.forge(AppendPayload(nil, c2s, tc.seq, []byte("fake")), tc.seq)
				assert.Equal(t, ErrDecrypt, server.Read(forged, 0, c2s, &rp, &p))
				assert.Equal(t, before, rp, "the window moved")

				// The real packets are accepted afterwards: a late one just
				// below the last received (refused had the window moved
				// past it), then the one at the forgery's sequence.
				require.NoError(t, server.Read(AppendPayload(nil, c2s, last-2, []byte("late")), 0, c2s, &rp, &p))
				require.NoError(t, server.Read(AppendPayload(nil, c2s, tc.seq, []byte("real")), 0, c2s, &rp, &p))
				assert.Equal(t, "real", string(p.Payload))
				assert.Equal(t, max(last, tc.seq), rp.mostRecent)
			})
		}
	}
}
