// Package tokentest mints connect tokens for tests: the same inputs always
// give the same bytes, so that tests and golden vectors can compare them.
package tokentest

import (
	"bytes"
	"time"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/token"
)

// GenerateWith makes a connect token from p as token.Generate does, with the
// given creation time (Unix seconds), nonce and connection keys in place of
// the clock and the random source. The nonce must never be used twice with
// the same private key outside tests.
func GenerateWith(p token.Params, createTimestamp uint64, nonce [crypto.TokenNonceBytes]byte, c2s, s2c crypto.Key) ([]byte, error) {
	rnd := make([]byte, 0, len(nonce)+2*crypto.KeyBytes)
	rnd = append(append(append(rnd, nonce[:]...), c2s[:]...), s2c[:]...)
	p.Rand = bytes.NewReader(rnd)
	p.Time = func() time.Time { return time.Unix(int64(createTimestamp), 0) }
	return token.Generate(&p)
}
