package token_test

import (
	"net/netip"
	"testing"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/aead"
	"github.com/gonetcode/netcode/internal/tokenwire"
	"github.com/gonetcode/netcode/token"
)

func BenchmarkGenerate(b *testing.B) {
	p := testParams()
	b.ReportAllocs()
	b.SetBytes(token.ConnectTokenBytes)
	for b.Loop() {
		if _, err := token.Generate(&p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGenerateParallel(b *testing.B) {
	p := testParams()
	b.ReportAllocs()
	b.SetBytes(token.ConnectTokenBytes)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := token.Generate(&p); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkGenerate32Servers(b *testing.B) {
	p := testParams()
	p.ServerAddrs = make33(netip.MustParseAddrPort("[2001:db8::1]:40000"))[:32]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := token.Generate(&p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	tok, err := token.Generate(ptr(testParams()))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := token.Parse(tok); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpenPrivate is the server's cost of reading the private part of a
// connection request: decrypt and parse.
func BenchmarkOpenPrivate(b *testing.B) {
	p := testParams()
	tok, err := token.Generate(&p)
	if err != nil {
		b.Fatal(err)
	}
	ct, err := token.Parse(tok)
	if err != nil {
		b.Fatal(err)
	}
	aead := crypto.NewPrivateTokenAEAD((*crypto.Key)(&p.PrivateKey))
	var priv tokenwire.Private
	b.ReportAllocs()
	b.SetBytes(tokenwire.PrivateBytes)
	for b.Loop() {
		if err := tokenwire.OpenPrivate(ct.PrivateData[:], aead, &ct.Nonce, ct.ProtocolID, ct.ExpireTimestamp, &priv); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParsePrivate(b *testing.B) {
	v := loadVectors(b)
	plain := findToken(b, v, "multi").PrivatePlaintext[:tokenwire.PrivatePlainBytes]
	var priv tokenwire.Private
	b.ReportAllocs()
	for b.Loop() {
		if err := tokenwire.ParsePrivate(plain, &priv); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendChallenge(b *testing.B) {
	a := aead.New(&crypto.Key{1})
	c := tokenwire.Challenge{ClientID: 1}
	buf := make([]byte, 0, tokenwire.ChallengeTokenBytes)
	b.ReportAllocs()
	b.SetBytes(tokenwire.ChallengeTokenBytes)
	seq := uint64(0)
	for b.Loop() {
		buf = tokenwire.AppendChallenge(buf[:0], a, seq, &c)
		seq++
	}
}

func BenchmarkOpenChallenge(b *testing.B) {
	a := aead.New(&crypto.Key{1})
	c := tokenwire.Challenge{ClientID: 1}
	sealed := tokenwire.AppendChallenge(nil, a, 5, &c)
	b.ReportAllocs()
	b.SetBytes(tokenwire.ChallengeTokenBytes)
	for b.Loop() {
		if err := tokenwire.OpenChallenge(a, 5, sealed, &c); err != nil {
			b.Fatal(err)
		}
	}
}

// ptr returns a pointer to a copy of p.
func ptr(p token.Params) *token.Params { return &p }
