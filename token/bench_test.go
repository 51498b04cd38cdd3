package token_test

import (
	"net/netip"
	"testing"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/token"
)

func BenchmarkGenerate(b *testing.B) {
	p := testParams()
	b.ReportAllocs()
	b.SetBytes(token.ConnectTokenBytes)
	for b.Loop() {
		if _, err := token.Generate(p); err != nil {
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
			if _, err := token.Generate(p); err != nil {
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
		if _, err := token.Generate(p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	tok, err := token.Generate(testParams())
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
	tok, err := token.Generate(p)
	if err != nil {
		b.Fatal(err)
	}
	ct, err := token.Parse(tok)
	if err != nil {
		b.Fatal(err)
	}
	aead := crypto.NewPrivateTokenAEAD((*crypto.Key)(&p.PrivateKey))
	var priv token.Private
	b.ReportAllocs()
	b.SetBytes(token.PrivateBytes)
	for b.Loop() {
		if err := token.OpenPrivate(ct.PrivateData[:], aead, &ct.Nonce, ct.ProtocolID, ct.ExpireTimestamp, &priv); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParsePrivate(b *testing.B) {
	v := loadVectors(b)
	plain := findToken(b, v, "multi").PrivatePlaintext[:token.PrivatePlainBytes]
	var priv token.Private
	b.ReportAllocs()
	for b.Loop() {
		if err := token.ParsePrivate(plain, &priv); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendChallenge(b *testing.B) {
	a := crypto.NewAEAD(&crypto.Key{1})
	c := token.Challenge{ClientID: 1}
	buf := make([]byte, 0, token.ChallengeTokenBytes)
	b.ReportAllocs()
	b.SetBytes(token.ChallengeTokenBytes)
	seq := uint64(0)
	for b.Loop() {
		buf = token.AppendChallenge(buf[:0], a, seq, &c)
		seq++
	}
}

func BenchmarkOpenChallenge(b *testing.B) {
	a := crypto.NewAEAD(&crypto.Key{1})
	c := token.Challenge{ClientID: 1}
	sealed := token.AppendChallenge(nil, a, 5, &c)
	b.ReportAllocs()
	b.SetBytes(token.ChallengeTokenBytes)
	for b.Loop() {
		if err := token.OpenChallenge(a, 5, sealed, &c); err != nil {
			b.Fatal(err)
		}
	}
}
