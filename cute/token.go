package cute

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/gonetcode/netcode/cute/internal/hydro"
	"github.com/gonetcode/netcode/cute/internal/wire"
)

// Token and payload sizes.
const (
	// ConnectTokenBytes is the size of a connect token as the web service
	// hands it to a client.
	ConnectTokenBytes = wire.TokenBytes
	// UserDataBytes is the size of the token's user data.
	UserDataBytes = wire.UserDataBytes
	// MaxServers is the most server addresses a token holds (28 if all are
	// IPv6: the public section has room for no more).
	MaxServers = wire.MaxEndpoints
	// MaxPayloadBytes is the largest payload one packet carries.
	MaxPayloadBytes = wire.MaxPayloadBytes
)

// Token defaults, for a zero TokenParams field.
const (
	DefaultExpireSeconds           = 30
	DefaultHandshakeTimeoutSeconds = 5
)

// TokenParams are what GenerateToken puts in a connect token.
type TokenParams struct {
	// ApplicationID must match the servers' and the client's.
	ApplicationID uint64
	// ClientID names the player; a server refuses a second connection
	// with the same id. The server reports it as the connection's id.
	ClientID uint64
	// SecretKey signs the token and seals its secret section.
	SecretKey SecretKey
	// ServerAddrs are the servers the client tries, in order: 1 to 32
	// (at most 28 IPv6). A server accepts a token only if its own address
	// is in the list.
	ServerAddrs []netip.AddrPort
	// ExpireSeconds is the token's lifetime from Now; 0 means
	// DefaultExpireSeconds. Negative is an error.
	ExpireSeconds int64
	// HandshakeTimeoutSeconds bounds each server's handshake; 0 means
	// DefaultHandshakeTimeoutSeconds. Negative is an error.
	HandshakeTimeoutSeconds int32
	// UserData travels sealed to the server, which hands it to the
	// application with the connection.
	UserData [UserDataBytes]byte
	// Now is the creation time; the zero Time means time.Now().
	Now time.Time
}

// Errors of GenerateToken besides the key's.
var (
	errExpire  = errors.New("cute: ExpireSeconds is negative")
	errTimeout = errors.New("cute: HandshakeTimeoutSeconds is negative")
	errServers = errors.New("cute: a token needs 1 to 32 server addresses")
	errNow     = errors.New("cute: Now is before 1970")
	errParams  = errors.New("cute: GenerateToken needs its TokenParams")
)

// GenerateToken mints a 1114-byte connect token, as
// cn_generate_connect_token does, with fresh random client-to-server and
// server-to-client keys; the secretbox IV and the signature's randomness
// come from crypto/rand too, so two tokens for the same player differ.
// p is read, never kept or changed (a pointer, as token.Generate takes).
func GenerateToken(p *TokenParams) ([]byte, error) {
	if p == nil {
		return nil, errParams
	}
	if err := p.SecretKey.check(); err != nil {
		return nil, err
	}
	switch {
	case p.ExpireSeconds < 0:
		return nil, errExpire
	case p.HandshakeTimeoutSeconds < 0:
		return nil, errTimeout
	case len(p.ServerAddrs) < 1 || len(p.ServerAddrs) > MaxServers:
		return nil, errServers
	}
	now := p.Now
	if now.IsZero() {
		now = time.Now()
	}
	if now.Unix() < 0 {
		return nil, errNow
	}
	expire := p.ExpireSeconds
	if expire == 0 {
		expire = DefaultExpireSeconds
	}
	timeout := p.HandshakeTimeoutSeconds
	if timeout == 0 {
		timeout = DefaultHandshakeTimeoutSeconds
	}
	created := uint64(now.Unix())
	expires := created + uint64(expire)
	if expires < created {
		expires = math.MaxUint64
	}
	wp := wire.TokenParams{
		ApplicationID:    p.ApplicationID,
		Created:          created,
		Expires:          expires,
		HandshakeTimeout: uint32(timeout),
		Endpoints:        p.ServerAddrs,
		ClientID:         p.ClientID,
		UserData:         p.UserData,
	}
	var iv wire.IV
	var r [hydro.SignRandBytes]byte
	for _, b := range [][]byte{wp.ClientToServer[:], wp.ServerToClient[:], iv[:], r[:]} {
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
	}
	tok := new([ConnectTokenBytes]byte)
	sk := [SecretKeyBytes]byte(p.SecretKey)
	err := wire.WriteToken(tok, &wp, &sk, &iv, &r)
	clear(sk[:])
	clear(wp.ClientToServer[:])
	clear(wp.ServerToClient[:])
	if err != nil {
		return nil, fmt.Errorf("cute: %w", err)
	}
	return tok[:], nil
}

// ConnectToken is what anyone holding a token can read from it: the
// public fields. The secret section (client id, user data) is sealed for
// the servers.
type ConnectToken struct {
	ApplicationID    uint64
	Created, Expires time.Time
	HandshakeTimeout time.Duration
	ServerAddrs      []netip.AddrPort
}

// ParseToken reads a connect token as a client does: the version, the
// application id (the same in both sections), the endpoint list and the
// timestamps. It does not judge the expiry (see ConnectToken.Expires) nor
// check the signature, which needs the servers' key. Errors wrap
// ErrInvalidConnectToken.
func ParseToken(b []byte) (*ConnectToken, error) {
	if len(b) != ConnectTokenBytes {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConnectToken, wire.ErrTokenSize)
	}
	var ct wire.ClientToken
	if err := wire.ReadClientToken(b, binary.LittleEndian.Uint64(b[wire.VersionBytes:]), 0, &ct); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConnectToken, err)
	}
	return &ConnectToken{
		ApplicationID:    ct.ApplicationID,
		Created:          unix(ct.Created),
		Expires:          unix(ct.Expires),
		HandshakeTimeout: time.Duration(ct.HandshakeTimeout) * time.Second,
		ServerAddrs:      ct.Endpoints,
	}, nil
}

// unix converts Unix seconds, saturating past what time.Time holds.
func unix(s uint64) time.Time {
	if s > math.MaxInt64/2 {
		s = math.MaxInt64 / 2
	}
	return time.Unix(int64(s), 0)
}
