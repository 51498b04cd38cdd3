// Package tokenwire holds the server's side of the netcode 1.02 token codec:
// the private part of a connect token (sealed by a backend, opened by a
// server), the challenge token a server seals for itself, and the address
// encoding both share with the public part. Package token builds the public
// API (Generate, Parse) on it.
//
// Every reader here treats its input as hostile: it checks lengths and counts
// before use, never panics and never allocates in proportion to its input.
package tokenwire

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/protocol"
)

// Sizes of the parts of netcode 1.02 tokens.
const (
	PrivateBytes        = protocol.PrivateTokenBytes            // 1024: the sealed private part, MAC included
	PrivatePlainBytes   = PrivateBytes - crypto.MACBytes        // 1008: the private part decrypted
	ChallengeTokenBytes = protocol.ChallengeTokenBytes          // 300: a sealed challenge token, MAC included
	ChallengePlainBytes = ChallengeTokenBytes - crypto.MACBytes // 284: a challenge token decrypted
	UserDataBytes       = 256                                   // opaque data from the backend to the server
	MaxServers          = 32                                    // most server addresses in one token
	NonceBytes          = crypto.TokenNonceBytes                // 24: the private part's nonce
)

// DefaultExpireSeconds is the lifetime of a token whose ExpireSeconds is 0,
// in token.Params and backend.Config alike: 30 s, as in the reference's
// example programs.
const DefaultExpireSeconds = 30

// ErrInvalid is returned (possibly wrapped; test with errors.Is) for a token,
// address or set of parameters that breaks the netcode 1.02 rules. Package
// token exports it as token.ErrInvalid.
var ErrInvalid = errors.New("netcode/token: invalid token")

// ErrDecrypt is returned when a sealed token does not authenticate: it was
// sealed with another key, for another protocol id or expire timestamp, or was
// tampered with.
var ErrDecrypt = errors.New("netcode/token: token does not decrypt")

// Invalid returns an error wrapping ErrInvalid with the reason msg.
func Invalid(msg string) error { return fmt.Errorf("%w: %s", ErrInvalid, msg) }

// The reasons a token or an address is invalid.
var (
	ErrLength    = Invalid("wrong length")
	ErrNumAddrs  = Invalid("number of server addresses not in [1,32]")
	errAddrType  = Invalid("address type is not 1 (IPv4) or 2 (IPv6)")
	errAddrShort = Invalid("address truncated")
	errAddrBad   = Invalid("address is not a valid IPv4 or IPv6 address")
	errAddrZone  = Invalid("IPv6 address has a zone, which a token cannot carry")
)

// CheckAddrs reports whether a list of addresses can be written in a token.
func CheckAddrs(addrs []netip.AddrPort) error {
	if len(addrs) < 1 || len(addrs) > MaxServers {
		return ErrNumAddrs
	}
	for _, a := range addrs {
		if !a.Addr().IsValid() {
			return errAddrBad
		}
		if a.Addr().Zone() != "" {
			return errAddrZone
		}
	}
	return nil
}

// Extend grows b by n bytes, reallocating only if its capacity is short, and
// returns the result; the new bytes are not cleared.
func Extend(b []byte, n int) []byte {
	l := len(b)
	if cap(b)-l < n {
		nb := make([]byte, l, l+n)
		copy(nb, b)
		b = nb
	}
	return b[:l+n]
}
