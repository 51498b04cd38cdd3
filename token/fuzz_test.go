package token_test

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/aead"
	"github.com/gonetcode/netcode/internal/tokenwire"
	"github.com/gonetcode/netcode/token"
)

// usedPublicBytes is the length of the meaningful part of a valid token: the
// rest is padding the reader ignores.
func usedPublicBytes(addrs []netip.AddrPort) int {
	n := 13 + 8 + 8 + 8 + crypto.TokenNonceBytes + tokenwire.PrivateBytes + 4 + 4
	for _, a := range addrs {
		n += len(tokenwire.AppendAddr(nil, a))
	}
	return n + 2*crypto.KeyBytes
}

// Offsets of the opaque private part in a connect token.
const (
	privStart = 13 + 8 + 8 + 8 + crypto.TokenNonceBytes
	privEnd   = privStart + tokenwire.PrivateBytes
)

// expandToken makes a 2048-byte token from a fuzz input that leaves out the
// private part (which Parse only copies) and the zero padding, so that the
// fuzzer spends its effort, and its input minimization, on the bytes that
// matter.
func expandToken(b []byte) []byte {
	tok := make([]byte, token.ConnectTokenBytes)
	n := copy(tok[:privStart], b)
	for i := privStart; i < privEnd; i++ {
		tok[i] = byte(i * 7)
	}
	copy(tok[privEnd:], b[n:])
	return tok
}

// compactToken is the inverse of expandToken, for seeds.
func compactToken(tok []byte, used int) []byte {
	return append(bytes.Clone(tok[:privStart]), tok[privEnd:used]...)
}

func FuzzParse(f *testing.F) {
	v := loadVectors(f)
	for _, tc := range v.ConnectTokens {
		f.Add(compactToken(tc.ConnectToken, tc.PublicUsedBytes))
	}
	used := findToken(f, v, "ipv4").PublicUsedBytes
	for _, tc := range v.InvalidConnectTokens {
		if len(tc.ConnectToken) == token.ConnectTokenBytes {
			f.Add(compactToken(tc.ConnectToken, used))
		}
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		// Any other length than 2048 is refused.
		if len(b) != token.ConnectTokenBytes {
			if ct, err := token.Parse(b); !errors.Is(err, token.ErrInvalid) || ct != nil {
				t.Fatalf("length %d: got %v, %v", len(b), ct, err)
			}
		}
		tok := expandToken(b)
		in := bytes.Clone(tok)
		ct, err := token.Parse(tok)
		if !bytes.Equal(in, tok) {
			t.Fatal("Parse modified its input")
		}
		if err != nil {
			if !errors.Is(err, token.ErrInvalid) || ct != nil {
				t.Fatalf("bad failure: %v, %v", ct, err)
			}
			return
		}
		// A token that parses writes back to the same meaningful bytes,
		// zero padded.
		out, err := ct.AppendBinary(nil)
		if err != nil {
			t.Fatalf("parsed token does not write back: %v", err)
		}
		used := usedPublicBytes(ct.ServerAddrs)
		if len(out) != token.ConnectTokenBytes || !bytes.Equal(out[:used], tok[:used]) {
			t.Fatal("round trip changed the token")
		}
		if !bytes.Equal(out[used:], make([]byte, token.ConnectTokenBytes-used)) {
			t.Fatal("padding not zero")
		}
	})
}

func FuzzParsePrivate(f *testing.F) {
	v := loadVectors(f)
	// Seeds are the meaningful bytes; the target zero pads them, so that
	// the fuzzer and its input minimization work on what matters.
	for _, tc := range v.ConnectTokens {
		f.Add([]byte(tc.PrivatePlaintext[:tc.PrivateUsedBytes]))
	}
	used := findToken(f, v, "ipv4").PrivateUsedBytes
	for _, tc := range v.InvalidPrivateTokens {
		f.Add([]byte(tc.PrivatePlaintext[:used]))
	}
	f.Add([]byte{})
	var p, q tokenwire.Private
	var plain, padded [tokenwire.PrivatePlainBytes]byte
	f.Fuzz(func(t *testing.T, b []byte) {
		// Too short is refused.
		if len(b) < tokenwire.PrivatePlainBytes {
			if err := tokenwire.ParsePrivate(b, &p); !errors.Is(err, token.ErrInvalid) {
				t.Fatalf("length %d: got %v", len(b), err)
			}
			clear(padded[copy(padded[:], b):])
			b = padded[:]
		}
		in := bytes.Clone(b)
		err := tokenwire.ParsePrivate(b, &p)
		if !bytes.Equal(in, b) {
			t.Fatal("ParsePrivate modified its input")
		}
		if err != nil {
			if !errors.Is(err, token.ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		// What parses writes back to the same meaningful bytes, zero
		// padded, and parses again to the same fields. (The vector tests
		// cover the encryption; here it would only slow the fuzzer.)
		tokenwire.WritePrivate(plain[:], p.ClientID, p.TimeoutSeconds, p.ServerAddrs, &p.ClientToServerKey, &p.ServerToClientKey, &p.UserData)
		used := 16 + 2*crypto.KeyBytes + token.UserDataBytes
		for _, a := range p.ServerAddrs {
			used += len(tokenwire.AppendAddr(nil, a))
		}
		if !bytes.Equal(plain[:used], b[:used]) {
			t.Fatal("re-encoding differs")
		}
		if !bytes.Equal(plain[used:], make([]byte, tokenwire.PrivatePlainBytes-used)) {
			t.Fatal("padding not zero")
		}
		if err := tokenwire.ParsePrivate(plain[:], &q); err != nil {
			t.Fatalf("re-encoding does not parse: %v", err)
		}
		if p.ClientID != q.ClientID || p.TimeoutSeconds != q.TimeoutSeconds || p.UserData != q.UserData ||
			p.ClientToServerKey != q.ClientToServerKey || p.ServerToClientKey != q.ServerToClientKey ||
			!equalAddrs(p.ServerAddrs, q.ServerAddrs) {
			t.Fatal("round trip changed the private token")
		}
	})
}

func equalAddrs(a, b []netip.AddrPort) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func FuzzOpenChallenge(f *testing.F) {
	v := loadVectors(f)
	for _, tc := range v.ChallengeTokens {
		f.Add(tc.Sequence, []byte(tc.Encrypted))
	}
	f.Add(uint64(0), []byte{})
	f.Add(uint64(1), make([]byte, tokenwire.ChallengeTokenBytes))
	a := aead.New((*crypto.Key)(v.Common.ChallengeKey))
	var c tokenwire.Challenge
	f.Fuzz(func(t *testing.T, seq uint64, b []byte) {
		in := bytes.Clone(b)
		err := tokenwire.OpenChallenge(a, seq, b, &c)
		if !bytes.Equal(in, b) {
			t.Fatal("OpenChallenge modified its input")
		}
		if err != nil {
			if len(b) == tokenwire.ChallengeTokenBytes && !errors.Is(err, tokenwire.ErrDecrypt) {
				t.Fatalf("right length, wrong error: %v", err)
			}
			if len(b) != tokenwire.ChallengeTokenBytes && !errors.Is(err, token.ErrInvalid) {
				t.Fatalf("wrong length, wrong error: %v", err)
			}
			return
		}
		// Only genuine tokens open; they seal back to the same bytes.
		if got := tokenwire.AppendChallenge(nil, a, seq, &c); !bytes.Equal(got, b) {
			t.Fatal("challenge token does not seal back to itself")
		}
	})
}

func FuzzReadAddr(f *testing.F) {
	v := loadVectors(f)
	for _, tc := range v.AddressEncoding {
		f.Add([]byte(tc.Encoded))
	}
	f.Add([]byte{})
	f.Add([]byte{3, 1, 2, 3, 4, 5, 6})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, n, err := tokenwire.ReadAddr(b)
		if err != nil {
			if !errors.Is(err, token.ErrInvalid) || n != 0 {
				t.Fatalf("bad failure: %d, %v", n, err)
			}
			return
		}
		if n != 7 && n != 19 || n > len(b) {
			t.Fatalf("bad length %d", n)
		}
		if !a.Addr().IsValid() {
			t.Fatal("invalid address read")
		}
		if got := tokenwire.AppendAddr(nil, a); !bytes.Equal(got, b[:n]) {
			t.Fatalf("%v encodes as %x, read from %x", a, got, b[:n])
		}
	})
}
