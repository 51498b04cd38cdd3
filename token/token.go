// Package token reads and writes netcode 1.02 connect tokens and challenge
// tokens, byte for byte as the C reference implementation does.
//
// A connect token is 2048 bytes. Its public part tells the client which
// servers to try, the keys to encrypt its packets with and how long to wait;
// its private part, sealed with the private key the token backend shares with
// the game servers, carries the same keys, the client id, the servers'
// internal addresses and 256 bytes of user data. A backend makes tokens with
// Generate; a client reads one with Parse; a server opens the private part
// found in a connection request with OpenPrivate (or decrypts it itself and
// calls ParsePrivate).
//
// A challenge token is 300 bytes the server seals under a key only it knows
// and the client echoes back, proving that it receives at its address. See
// AppendChallenge and OpenChallenge.
//
// Every reader here treats its input as hostile: it checks lengths and
// counts before use, never panics and never allocates in proportion to its
// input.
package token

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"sync"
	"time"

	"github.com/gonetcode/netcode/crypto"
)

// Sizes of netcode 1.02 tokens and their parts.
const (
	ConnectTokenBytes   = 2048                                  // a whole connect token
	PrivateBytes        = 1024                                  // the sealed private part, MAC included
	PrivatePlainBytes   = PrivateBytes - crypto.MACBytes        // 1008: the private part decrypted
	ChallengeTokenBytes = 300                                   // a sealed challenge token, MAC included
	ChallengePlainBytes = ChallengeTokenBytes - crypto.MACBytes // 284: a challenge token decrypted
	UserDataBytes       = 256                                   // opaque data from the backend to the server
	MaxServers          = 32                                    // most server addresses in one token
	NonceBytes          = crypto.XNonceBytes                    // 24: the private part's nonce
	KeyBytes            = crypto.KeyBytes                       // 32: every key
)

// NeverExpires is the expire timestamp of a token made with a negative
// ExpireSeconds, as the reference's netcode_generate_connect_token writes it.
const NeverExpires = math.MaxUint64

// Offsets into the public part of a connect token.
const (
	offVersion  = 0
	offProtocol = offVersion + crypto.VersionInfoBytes // 13
	offCreate   = offProtocol + 8                      // 21
	offExpire   = offCreate + 8                        // 29
	offNonce    = offExpire + 8                        // 37
	offPrivate  = offNonce + NonceBytes                // 61
	offTimeout  = offPrivate + PrivateBytes            // 1085
	offNumAddrs = offTimeout + 4                       // 1089
	offAddrs    = offNumAddrs + 4                      // 1093
)

// ErrInvalid is returned (possibly wrapped; test with errors.Is) for a token,
// address or set of parameters that breaks the netcode 1.02 rules.
var ErrInvalid = errors.New("netcode/token: invalid token")

// ErrDecrypt is returned when a sealed token does not authenticate: it was
// sealed with another key, for another protocol id or expire timestamp, or
// was tampered with.
var ErrDecrypt = errors.New("netcode/token: token does not decrypt")

// ErrUnspecifiedAddr is returned (wrapped, with ErrInvalid) by Generate and
// GenerateWith for a server address that no client can send to: an
// unspecified address (0.0.0.0, ::) or port 0. The Addr of a Listener
// bound to ":0" or "0.0.0.0:40000" is such an address: mint with the
// address clients reach the server at, and the Listener's port.
var ErrUnspecifiedAddr = errors.New("a concrete address and port are needed, not an unspecified address or port 0")

// invalid returns an error that wraps ErrInvalid. The hot paths use
// package-level values made with it so that rejecting input never allocates.
func invalid(msg string) error { return fmt.Errorf("%w: %s", ErrInvalid, msg) }

var (
	errLength        = invalid("wrong length")
	errVersion       = invalid(`version info is not "NETCODE 1.02"`)
	errCreateExpire  = invalid("create timestamp after expire timestamp")
	errNumAddrs      = invalid("number of server addresses not in [1,32]")
	errAddrType      = invalid("address type is not 1 (IPv4) or 2 (IPv6)")
	errAddrShort     = invalid("address truncated")
	errAddrBad       = invalid("address is not a valid IPv4 or IPv6 address")
	errAddrZone      = invalid("IPv6 address has a zone, which a token cannot carry")
	errInternalCount = invalid("InternalAddrs must be empty or as long as ServerAddrs")
	errZeroKey       = invalid("private key is all zeros")
	errExpire        = invalid("ExpireSeconds is negative (use NeverExpire for a token that never expires)")
	errTimeout       = invalid("TimeoutSeconds is negative (use NoTimeout to disable timeouts)")
)

// Defaults for zero Params fields, as in the reference's example programs.
const (
	// DefaultExpireSeconds is the lifetime of a token whose ExpireSeconds
	// is 0.
	DefaultExpireSeconds = 30
	// DefaultTimeoutSeconds is the connection timeout of a token whose
	// TimeoutSeconds is 0.
	DefaultTimeoutSeconds = 5
	// NoTimeout, as TimeoutSeconds, disables the connection timeout: a
	// dead peer then holds its slot until the server closes it, and a Dial
	// to nothing waits until the token expires. For development only (a
	// debugger stopped at a breakpoint). It is written as -1, which the
	// reference reads as "no timeout" too.
	NoTimeout int32 = -1
)

// Params are the inputs of a connect token.
type Params struct {
	// ProtocolID identifies the game and its version; servers refuse
	// tokens for another protocol id.
	ProtocolID uint64
	// ClientID is the client's id, unique among the clients of a server.
	ClientID uint64
	// PrivateKey is the key shared by the token backend and the servers.
	PrivateKey [KeyBytes]byte
	// ServerAddrs are the public addresses the client tries, in order
	// (1 to 32 of them).
	ServerAddrs []netip.AddrPort
	// InternalAddrs, if not empty, are the addresses the servers check
	// against their own (for servers behind NAT or a load balancer). It
	// must have one entry per ServerAddrs entry. Empty means ServerAddrs.
	InternalAddrs []netip.AddrPort
	// ExpireSeconds is the token's lifetime from its creation; 0 means
	// DefaultExpireSeconds. A negative value is an error.
	ExpireSeconds int64
	// NeverExpire makes a token that never expires (expire timestamp
	// NeverExpires), whatever ExpireSeconds says. For development only:
	// such a token is good forever to whoever holds it, and servers
	// remember it (to refuse it again) for as long as they run.
	NeverExpire bool
	// TimeoutSeconds is the connection timeout: how long either side waits
	// without hearing from the other; 0 means DefaultTimeoutSeconds.
	// NoTimeout disables timeouts (development only); other negative
	// values are an error.
	TimeoutSeconds int32
	// UserData is passed, unread, to the server the client connects to.
	UserData [UserDataBytes]byte
}

// internal returns the addresses that go into the private part.
func (p *Params) internal() []netip.AddrPort {
	if len(p.InternalAddrs) == 0 {
		return p.ServerAddrs
	}
	return p.InternalAddrs
}

// validate checks p and fills in the defaults of its zero fields.
func (p *Params) validate() error {
	if p.PrivateKey == ([KeyBytes]byte{}) {
		return errZeroKey
	}
	switch {
	case p.ExpireSeconds < 0:
		return errExpire
	case p.ExpireSeconds == 0:
		p.ExpireSeconds = DefaultExpireSeconds
	}
	switch {
	case p.TimeoutSeconds == 0:
		p.TimeoutSeconds = DefaultTimeoutSeconds
	case p.TimeoutSeconds < 0 && p.TimeoutSeconds != NoTimeout:
		return errTimeout
	}
	if err := checkAddrs(p.ServerAddrs); err != nil {
		return err
	}
	for _, a := range p.ServerAddrs {
		if a.Addr().Unmap().IsUnspecified() || a.Port() == 0 {
			return fmt.Errorf("%w: server address %v: %w", ErrInvalid, a, ErrUnspecifiedAddr)
		}
	}
	if len(p.InternalAddrs) != 0 {
		if len(p.InternalAddrs) != len(p.ServerAddrs) {
			return errInternalCount
		}
		if err := checkAddrs(p.InternalAddrs); err != nil {
			return err
		}
	}
	return nil
}

// checkAddrs reports whether a list of addresses can be written in a token.
func checkAddrs(addrs []netip.AddrPort) error {
	if len(addrs) < 1 || len(addrs) > MaxServers {
		return errNumAddrs
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

// expireTimestamp computes the expire timestamp as the reference does, but
// saturating instead of wrapping around on overflow; a negative lifetime
// never expires.
func expireTimestamp(create uint64, seconds int64) uint64 {
	if seconds < 0 {
		return NeverExpires
	}
	if uint64(seconds) > NeverExpires-create {
		return NeverExpires
	}
	return create + uint64(seconds)
}

// minter is the per-call state of Generate, pooled so that minting a token
// allocates only the token: the cipher set up for the private key and room
// for the random nonce and keys.
type minter struct {
	key  [KeyBytes]byte
	aead *crypto.PrivateTokenAEAD
	rnd  [NonceBytes + 2*KeyBytes]byte
}

var minters sync.Pool

// getMinter returns a minter for key, reusing a pooled one set up for the
// same key when there is one.
func getMinter(key *[KeyBytes]byte) *minter {
	m, _ := minters.Get().(*minter)
	if m == nil {
		m = new(minter)
	}
	if m.aead == nil || m.key != *key {
		m.key = *key
		m.aead = crypto.NewPrivateTokenAEAD((*crypto.Key)(key))
	}
	return m
}

func putMinter(m *minter) {
	clear(m.rnd[:]) // the connection keys of the last token
	minters.Put(m)
}

// Generate makes a 2048-byte connect token from p, with a random nonce, random
// client-to-server and server-to-client keys, created now. It is safe for
// concurrent use.
func Generate(p Params) ([]byte, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	m := getMinter(&p.PrivateKey)
	defer putMinter(m)
	// One read from the random source for the nonce and both keys.
	if err := crypto.RandomBytes(m.rnd[:]); err != nil {
		return nil, fmt.Errorf("netcode/token: reading random bytes: %w", err)
	}
	nonce := (*[NonceBytes]byte)(m.rnd[:NonceBytes])
	c2s := (*crypto.Key)(m.rnd[NonceBytes : NonceBytes+KeyBytes])
	s2c := (*crypto.Key)(m.rnd[NonceBytes+KeyBytes:])
	return appendToken(make([]byte, 0, ConnectTokenBytes), &p, m.aead, uint64(time.Now().Unix()), nonce, c2s, s2c), nil
}

// GenerateWith makes a connect token from p with the given creation time
// (Unix seconds), nonce and keys. The same inputs always give the same bytes;
// it exists for tests and for backends with their own source of randomness.
// The nonce must never be used twice with the same private key.
func GenerateWith(p Params, createTimestamp uint64, nonce [NonceBytes]byte, c2s, s2c crypto.Key) ([]byte, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	m := getMinter(&p.PrivateKey)
	defer putMinter(m)
	n := (*[NonceBytes]byte)(m.rnd[:NonceBytes])
	*n = nonce
	return appendToken(make([]byte, 0, ConnectTokenBytes), &p, m.aead, createTimestamp, n, &c2s, &s2c), nil
}

// appendToken appends a connect token to dst. p must have been validated.
func appendToken(dst []byte, p *Params, aead *crypto.PrivateTokenAEAD, create uint64, nonce *[NonceBytes]byte, c2s, s2c *crypto.Key) []byte {
	seconds := p.ExpireSeconds
	if p.NeverExpire {
		seconds = -1
	}
	expire := expireTimestamp(create, seconds)
	start := len(dst)
	dst = extend(dst, ConnectTokenBytes)
	b := dst[start:]
	copy(b[offVersion:], crypto.VersionInfo[:])
	binary.LittleEndian.PutUint64(b[offProtocol:], p.ProtocolID)
	binary.LittleEndian.PutUint64(b[offCreate:], create)
	binary.LittleEndian.PutUint64(b[offExpire:], expire)
	copy(b[offNonce:], nonce[:])

	// The private part is written in place and sealed in place.
	plain := b[offPrivate : offPrivate+PrivatePlainBytes]
	writePrivate(plain, p.ClientID, p.TimeoutSeconds, p.internal(), c2s, s2c, &p.UserData)
	aead.Seal(plain[:0], nonce, p.ProtocolID, expire, plain)

	binary.LittleEndian.PutUint32(b[offTimeout:], uint32(p.TimeoutSeconds))
	writePublicTail(b[offNumAddrs:], p.ServerAddrs, c2s, s2c)
	return dst
}

// writePublicTail writes the address count, the addresses and the keys at
// the start of b, and zeroes the rest of b.
func writePublicTail(b []byte, addrs []netip.AddrPort, c2s, s2c *crypto.Key) {
	binary.LittleEndian.PutUint32(b, uint32(len(addrs)))
	n := 4
	for _, a := range addrs {
		n += putAddr(b[n:], a)
	}
	n += copy(b[n:], c2s[:])
	n += copy(b[n:], s2c[:])
	clear(b[n:])
}

// extend lengthens b by n bytes, reallocating only if its capacity is short.
// The new bytes are not cleared: the caller writes every one of them.
func extend(b []byte, n int) []byte {
	l := len(b)
	if cap(b)-l < n {
		nb := make([]byte, l, l+n)
		copy(nb, b)
		b = nb
	}
	return b[:l+n]
}
