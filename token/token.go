// Package token mints and reads netcode 1.02 connect tokens, byte for byte as
// the C reference implementation does.
//
// A connect token is 2048 bytes. Its public part tells the client which
// servers to try, the keys to encrypt its packets with and how long to wait;
// its private part, sealed with the private key the token backend shares with
// the game servers, carries the same keys, the client id, the servers'
// internal addresses and 256 bytes of user data. A backend makes tokens with
// Generate; a client, or a tool, reads one with Parse. Opening the private
// part is the server's job, done inside package netcode.
//
// Every reader here treats its input as hostile: it checks lengths and
// counts before use, never panics and never allocates in proportion to its
// input.
package token

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"sync"
	"time"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/aead"
	"github.com/gonetcode/netcode/internal/tokenwire"
)

// Sizes of netcode 1.02 connect tokens.
const (
	ConnectTokenBytes = 2048                    // a whole connect token
	UserDataBytes     = tokenwire.UserDataBytes // 256: opaque data from the backend to the server
	MaxServers        = tokenwire.MaxServers    // 32: most server addresses in one token
)

// Sizes of the parts of a connect token, as package tokenwire defines them.
const (
	nonceBytes        = tokenwire.NonceBytes
	privateBytes      = tokenwire.PrivateBytes
	privatePlainBytes = tokenwire.PrivatePlainBytes
	keyBytes          = crypto.KeyBytes
)

// NeverExpireTimestamp is the expire timestamp (ConnectToken.ExpireTimestamp)
// of a token made with Params.NeverExpire, as the reference's
// netcode_generate_connect_token writes it for a negative lifetime.
const NeverExpireTimestamp = math.MaxUint64

// Offsets into the public part of a connect token.
const (
	offVersion  = 0
	offProtocol = offVersion + len(aead.VersionInfo) // 13
	offCreate   = offProtocol + 8                    // 21
	offExpire   = offCreate + 8                      // 29
	offNonce    = offExpire + 8                      // 37
	offPrivate  = offNonce + nonceBytes              // 61
	offTimeout  = offPrivate + privateBytes          // 1085
	offNumAddrs = offTimeout + 4                     // 1089
	offAddrs    = offNumAddrs + 4                    // 1093
)

// ErrInvalid is returned (possibly wrapped; test with errors.Is) for a token,
// address or set of parameters that breaks the netcode 1.02 rules.
var ErrInvalid = tokenwire.ErrInvalid

// ErrUnspecifiedAddr is returned (wrapped, with ErrInvalid) by Generate for
// a server address that no client can send to: an
// unspecified address (0.0.0.0, ::) or port 0. The Addr of a Listener
// bound to ":0" or "0.0.0.0:40000" is such an address: mint with the
// address clients reach the server at, and the Listener's port.
var ErrUnspecifiedAddr = errors.New("netcode/token: " + unspecifiedAddr)

const unspecifiedAddr = "a concrete address and port are needed, not an unspecified address or port 0"

// addrError is the error for a server address that no client can send to:
// it wraps both ErrInvalid and ErrUnspecifiedAddr, and names the package once.
type addrError struct{ addr netip.AddrPort }

func (e *addrError) Error() string {
	return fmt.Sprintf("%v: server address %v: %s", ErrInvalid, e.addr, unspecifiedAddr)
}

func (e *addrError) Unwrap() []error { return []error{ErrInvalid, ErrUnspecifiedAddr} }

// Why a token or its parameters are invalid; each wraps ErrInvalid.
var (
	errLength        = tokenwire.ErrLength
	errNumAddrs      = tokenwire.ErrNumAddrs
	errVersion       = tokenwire.Invalid(`version info is not "NETCODE 1.02"`)
	errCreateExpire  = tokenwire.Invalid("create timestamp after expire timestamp")
	errInternalCount = tokenwire.Invalid("InternalAddrs must be empty or as long as ServerAddrs")
	errZeroKey       = tokenwire.Invalid("private key is all zeros")
	errExpire        = tokenwire.Invalid("ExpireSeconds is negative (use NeverExpire for a token that never expires)")
	errTimeout       = tokenwire.Invalid("TimeoutSeconds is negative (use NoTimeout to disable timeouts)")
)

// Defaults for zero Params fields, as in the reference's example programs,
// and the value that disables timeouts.
const (
	// defaultExpireSeconds is the lifetime of a token whose ExpireSeconds
	// is 0: 30 s.
	defaultExpireSeconds = tokenwire.DefaultExpireSeconds
	// defaultTimeoutSeconds is the connection timeout of a token whose
	// TimeoutSeconds is 0.
	defaultTimeoutSeconds = 5
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
	PrivateKey crypto.Key
	// ServerAddrs are the public addresses the client tries, in order
	// (1 to 32 of them).
	ServerAddrs []netip.AddrPort
	// InternalAddrs, if not empty, are the addresses the servers check
	// against their own (for servers behind NAT or a load balancer). It
	// must have one entry per ServerAddrs entry. Empty means ServerAddrs.
	InternalAddrs []netip.AddrPort
	// ExpireSeconds is the token's lifetime from its creation; 0 means 30
	// seconds. A negative value is an error.
	ExpireSeconds int64
	// NeverExpire makes a token that never expires (expire timestamp
	// NeverExpireTimestamp), whatever ExpireSeconds says. For development only:
	// such a token is good forever to whoever holds it, and servers
	// remember it (to refuse it again) for as long as they run.
	NeverExpire bool
	// TimeoutSeconds is the connection timeout: how long either side waits
	// without hearing from the other; 0 means 5 seconds.
	// NoTimeout disables timeouts (development only); other negative
	// values are an error.
	TimeoutSeconds int32
	// UserData is passed, unread, to the server the client connects to.
	UserData [UserDataBytes]byte

	// Rand, if not nil, is read for the token's nonce and connection keys
	// instead of the operating system's secure random source. It exists
	// for tests that need the same token every time: a source that repeats
	// itself, or that others can predict, breaks the encryption of every
	// connection made with its tokens.
	Rand io.Reader
	// Time, if not nil, gives the token's creation time instead of
	// time.Now.
	Time func() time.Time
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
	if p.PrivateKey == (crypto.Key{}) {
		return errZeroKey
	}
	switch {
	case p.ExpireSeconds < 0:
		return errExpire
	case p.ExpireSeconds == 0:
		p.ExpireSeconds = defaultExpireSeconds
	}
	switch {
	case p.TimeoutSeconds == 0:
		p.TimeoutSeconds = defaultTimeoutSeconds
	case p.TimeoutSeconds < 0 && p.TimeoutSeconds != NoTimeout:
		return errTimeout
	}
	if err := tokenwire.CheckAddrs(p.ServerAddrs); err != nil {
		return err
	}
	for _, a := range p.ServerAddrs {
		if a.Addr().Unmap().IsUnspecified() || a.Port() == 0 {
			return &addrError{a}
		}
	}
	if len(p.InternalAddrs) != 0 {
		if len(p.InternalAddrs) != len(p.ServerAddrs) {
			return errInternalCount
		}
		if err := tokenwire.CheckAddrs(p.InternalAddrs); err != nil {
			return err
		}
	}
	return nil
}

// expireTimestamp computes the expire timestamp as the reference does, but
// saturating instead of wrapping around on overflow; a negative lifetime
// never expires.
func expireTimestamp(create uint64, seconds int64) uint64 {
	if seconds < 0 {
		return NeverExpireTimestamp
	}
	if uint64(seconds) > NeverExpireTimestamp-create {
		return NeverExpireTimestamp
	}
	return create + uint64(seconds)
}

// minter is the per-call state of Generate, pooled so that minting a token
// allocates only the token: the cipher set up for the private key and room
// for the random nonce and keys.
type minter struct {
	key  crypto.Key
	aead *crypto.PrivateTokenAEAD
	rnd  [nonceBytes + 2*keyBytes]byte
}

var minters sync.Pool

// getMinter returns a minter for key, reusing a pooled one set up for the
// same key when there is one.
func getMinter(key *crypto.Key) *minter {
	m, _ := minters.Get().(*minter)
	if m == nil {
		m = new(minter)
	}
	if m.aead == nil || m.key != *key {
		m.key = *key
		m.aead = crypto.NewPrivateTokenAEAD(key)
	}
	return m
}

func putMinter(m *minter) {
	clear(m.rnd[:]) // the connection keys of the last token
	minters.Put(m)
}

// Generate makes a 2048-byte connect token from p, with a random nonce and
// random client-to-server and server-to-client keys (read from p.Rand if it
// is set), created now (p.Time if set). It is safe for concurrent use.
func Generate(params *Params) ([]byte, error) {
	if params == nil {
		return nil, tokenwire.Invalid("nil Params")
	}
	p := *params // validate fills in defaults; the caller's Params stay as given
	if err := p.validate(); err != nil {
		return nil, err
	}
	m := getMinter(&p.PrivateKey)
	defer putMinter(m)
	// One read from the random source for the nonce and both keys.
	rnd := p.Rand
	if rnd == nil {
		rnd = rand.Reader
	}
	if _, err := io.ReadFull(rnd, m.rnd[:]); err != nil {
		return nil, fmt.Errorf("netcode/token: reading random bytes: %w", err)
	}
	now := time.Now()
	if p.Time != nil {
		now = p.Time()
	}
	nonce := (*[nonceBytes]byte)(m.rnd[:nonceBytes])
	c2s := (*crypto.Key)(m.rnd[nonceBytes : nonceBytes+keyBytes])
	s2c := (*crypto.Key)(m.rnd[nonceBytes+keyBytes:])
	return appendToken(make([]byte, 0, ConnectTokenBytes), &p, m.aead, uint64(now.Unix()), nonce, c2s, s2c), nil
}

// appendToken appends a connect token to dst. p must have been validated.
func appendToken(dst []byte, p *Params, ta *crypto.PrivateTokenAEAD, create uint64, nonce *[nonceBytes]byte, c2s, s2c *crypto.Key) []byte {
	seconds := p.ExpireSeconds
	if p.NeverExpire {
		seconds = -1
	}
	expire := expireTimestamp(create, seconds)
	start := len(dst)
	dst = tokenwire.Extend(dst, ConnectTokenBytes)
	b := dst[start:]
	copy(b[offVersion:], []byte(aead.VersionInfo))
	binary.LittleEndian.PutUint64(b[offProtocol:], p.ProtocolID)
	binary.LittleEndian.PutUint64(b[offCreate:], create)
	binary.LittleEndian.PutUint64(b[offExpire:], expire)
	copy(b[offNonce:], nonce[:])

	// The private part is written in place and sealed in place.
	plain := b[offPrivate : offPrivate+privatePlainBytes]
	tokenwire.WritePrivate(plain, p.ClientID, p.TimeoutSeconds, p.internal(), c2s, s2c, &p.UserData)
	aead.SealToken(ta, plain[:0], nonce, p.ProtocolID, expire, plain)

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
		n += tokenwire.PutAddr(b[n:], a)
	}
	n += copy(b[n:], c2s[:])
	n += copy(b[n:], s2c[:])
	clear(b[n:])
}
