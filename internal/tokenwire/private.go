package tokenwire

import (
	"encoding/binary"
	"net/netip"
	"sync"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/aead"
)

// Private is the private part of a connect token, as the server reads it.
type Private struct {
	// ClientID is the client's id.
	ClientID uint64
	// TimeoutSeconds is the connection timeout; negative disables it.
	TimeoutSeconds int32
	// ServerAddrs are the internal addresses of the servers the token is
	// good for; a server checks that it is one of them.
	ServerAddrs []netip.AddrPort
	// ClientToServerKey and ServerToClientKey encrypt the packets of the
	// connection in each direction.
	ClientToServerKey, ServerToClientKey crypto.Key
	// UserData is the backend's data for the server.
	UserData [UserDataBytes]byte
}

// Private plaintext layout: client id 8, timeout 4, address count 4,
// addresses, client-to-server key 32, server-to-client key 32, user data 256,
// zero padding to PrivatePlainBytes.
const privAddrs = 8 + 4 + 4

// WritePrivate writes a private plaintext into b, which must be
// PrivatePlainBytes long. The addresses must have been validated.
func WritePrivate(b []byte, clientID uint64, timeout int32, addrs []netip.AddrPort, c2s, s2c *crypto.Key, userData *[UserDataBytes]byte) {
	_ = b[PrivatePlainBytes-1]
	binary.LittleEndian.PutUint64(b[0:], clientID)
	binary.LittleEndian.PutUint32(b[8:], uint32(timeout))
	binary.LittleEndian.PutUint32(b[12:], uint32(len(addrs)))
	n := privAddrs
	for _, a := range addrs {
		n += PutAddr(b[n:], a)
	}
	n += copy(b[n:], c2s[:])
	n += copy(b[n:], s2c[:])
	n += copy(b[n:], userData[:])
	clear(b[n:])
}

// ParsePrivate reads the decrypted private part of a connect token into p.
// plain must hold at least PrivatePlainBytes bytes, of which only the first
// PrivatePlainBytes are read (so the 1024-byte private part decrypted in
// place may be passed whole). It applies the checks of the reference's
// netcode_read_connect_token_private — 1 to 32 addresses, types 1 and 2 only
// — and returns an error wrapping ErrInvalid if one fails, leaving p in an
// unspecified state.
//
// ParsePrivate reuses the capacity of p.ServerAddrs, so parsing into the same
// Private again and again does not allocate.
func ParsePrivate(plain []byte, p *Private) error {
	if len(plain) < PrivatePlainBytes {
		return ErrLength
	}
	plain = plain[:PrivatePlainBytes]
	n := binary.LittleEndian.Uint32(plain[12:])
	if n < 1 || n > MaxServers {
		return ErrNumAddrs
	}
	if cap(p.ServerAddrs) < int(n) {
		p.ServerAddrs = make([]netip.AddrPort, 0, MaxServers)
	}
	addrs, used, err := ReadAddrs(p.ServerAddrs, plain[privAddrs:], int(n))
	p.ServerAddrs = addrs
	if err != nil {
		return err
	}
	p.ClientID = binary.LittleEndian.Uint64(plain[0:])
	p.TimeoutSeconds = int32(binary.LittleEndian.Uint32(plain[8:]))
	// At most 32 IPv6 addresses: keys and user data always fit.
	rest := plain[privAddrs+used:]
	copy(p.ClientToServerKey[:], rest[:crypto.KeyBytes])
	copy(p.ServerToClientKey[:], rest[crypto.KeyBytes:2*crypto.KeyBytes])
	copy(p.UserData[:], rest[2*crypto.KeyBytes:2*crypto.KeyBytes+UserDataBytes])
	return nil
}

// SealPrivate appends the sealed private part made from p (PrivateBytes
// bytes) to dst and returns the result. It is bound to protocolID and to the
// token's expire timestamp, and must be sealed under a nonce never used
// before with the same key. It returns an error wrapping ErrInvalid, and dst
// unchanged, if p has no or more than 32 addresses or an address that cannot
// be written. With enough capacity in dst it does not allocate.
func SealPrivate(dst []byte, p *Private, ta *crypto.PrivateTokenAEAD, nonce *[NonceBytes]byte, protocolID, expire uint64) ([]byte, error) {
	if err := CheckAddrs(p.ServerAddrs); err != nil {
		return dst, err
	}
	start := len(dst)
	dst = Extend(dst, PrivateBytes)
	plain := dst[start : start+PrivatePlainBytes]
	WritePrivate(plain, p.ClientID, p.TimeoutSeconds, p.ServerAddrs, &p.ClientToServerKey, &p.ServerToClientKey, &p.UserData)
	aead.SealToken(ta, plain[:0], nonce, protocolID, expire, plain)
	return dst, nil
}

// privScratch holds decrypted private parts between OpenPrivate and
// ParsePrivate, so that OpenPrivate neither allocates nor writes to its input.
var privScratch = sync.Pool{New: func() any { return new([PrivatePlainBytes]byte) }}

// OpenPrivate authenticates and decrypts a sealed private part (PrivateBytes
// long) and reads it into p as ParsePrivate does. It returns ErrDecrypt if
// the private part does not authenticate under ta's key, nonce, protocolID
// and expire, and an error wrapping ErrInvalid if it has the wrong length or
// decrypts to an invalid token. sealed is not modified: it is decrypted into
// scratch space that is wiped afterwards.
func OpenPrivate(sealed []byte, ta *crypto.PrivateTokenAEAD, nonce *[NonceBytes]byte, protocolID, expire uint64, p *Private) error {
	if len(sealed) != PrivateBytes {
		return ErrLength
	}
	buf := privScratch.Get().(*[PrivatePlainBytes]byte)
	defer func() {
		clear(buf[:])
		privScratch.Put(buf)
	}()
	plain, err := aead.OpenToken(ta, buf[:0], nonce, protocolID, expire, sealed)
	if err != nil {
		return ErrDecrypt
	}
	return ParsePrivate(plain, p)
}
