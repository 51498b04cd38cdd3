package token

import (
	"bytes"
	"encoding/binary"
	"net/netip"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/aead"
	"github.com/gonetcode/netcode/internal/tokenwire"
	"github.com/gonetcode/netcode/protocol"
)

// ConnectToken is the public part of a connect token: what a client reads
// and what it forwards, still sealed, to the server.
type ConnectToken struct {
	// ProtocolID, CreateTimestamp and ExpireTimestamp are as minted; the
	// timestamps are Unix seconds, and the expire timestamp is bound to the
	// private part.
	ProtocolID, CreateTimestamp, ExpireTimestamp uint64
	// Nonce is the XChaCha20-Poly1305 nonce of the private part.
	Nonce [crypto.TokenNonceBytes]byte
	// PrivateData is the sealed private part (MAC included).
	PrivateData [protocol.PrivateTokenBytes]byte
	// TimeoutSeconds is the connection timeout; negative disables it.
	TimeoutSeconds int32
	// ServerAddrs are the servers to try, in order.
	ServerAddrs []netip.AddrPort
	// ClientToServerKey and ServerToClientKey encrypt the packets of the
	// connection in each direction.
	ClientToServerKey, ServerToClientKey crypto.Key
}

// Parse reads a 2048-byte connect token. It applies every check of the
// reference's netcode_read_connect_token — exact length, version info
// "NETCODE 1.02\x00", create timestamp not after expire timestamp, 1 to 32
// server addresses, address types 1 and 2 only — and returns an error wrapping
// ErrInvalid if one fails. Like the reference, it does not look at the zero
// padding after the keys. Parse does not keep b.
func Parse(b []byte) (*ConnectToken, error) {
	if len(b) != ConnectTokenBytes {
		return nil, errLength
	}
	if !bytes.Equal(b[offVersion:offProtocol], []byte(aead.VersionInfo)) {
		return nil, errVersion
	}
	t := &ConnectToken{
		ProtocolID:      binary.LittleEndian.Uint64(b[offProtocol:]),
		CreateTimestamp: binary.LittleEndian.Uint64(b[offCreate:]),
		ExpireTimestamp: binary.LittleEndian.Uint64(b[offExpire:]),
	}
	if t.CreateTimestamp > t.ExpireTimestamp {
		return nil, errCreateExpire
	}
	copy(t.Nonce[:], b[offNonce:offPrivate])
	copy(t.PrivateData[:], b[offPrivate:offTimeout])
	t.TimeoutSeconds = int32(binary.LittleEndian.Uint32(b[offTimeout:]))
	n := binary.LittleEndian.Uint32(b[offNumAddrs:])
	if n < 1 || n > MaxServers {
		return nil, errNumAddrs
	}
	addrs, used, err := tokenwire.ReadAddrs(make([]netip.AddrPort, 0, n), b[offAddrs:], int(n))
	if err != nil {
		return nil, err
	}
	t.ServerAddrs = addrs
	rest := b[offAddrs+used:]
	// At most 32 IPv6 addresses: the keys always fit.
	copy(t.ClientToServerKey[:], rest[:keyBytes])
	copy(t.ServerToClientKey[:], rest[keyBytes:2*keyBytes])
	return t, nil
}

// AppendBinary appends the 2048-byte encoding of t to dst. It returns an error
// wrapping ErrInvalid, and dst unchanged, if t could not be read back by Parse:
// no or more than 32 server addresses, an invalid or zoned address, or a
// create timestamp after the expire timestamp.
func (t *ConnectToken) AppendBinary(dst []byte) ([]byte, error) {
	if err := tokenwire.CheckAddrs(t.ServerAddrs); err != nil {
		return dst, err
	}
	if t.CreateTimestamp > t.ExpireTimestamp {
		return dst, errCreateExpire
	}
	start := len(dst)
	dst = tokenwire.Extend(dst, ConnectTokenBytes)
	b := dst[start:]
	copy(b[offVersion:], []byte(aead.VersionInfo))
	binary.LittleEndian.PutUint64(b[offProtocol:], t.ProtocolID)
	binary.LittleEndian.PutUint64(b[offCreate:], t.CreateTimestamp)
	binary.LittleEndian.PutUint64(b[offExpire:], t.ExpireTimestamp)
	copy(b[offNonce:], t.Nonce[:])
	copy(b[offPrivate:], t.PrivateData[:])
	binary.LittleEndian.PutUint32(b[offTimeout:], uint32(t.TimeoutSeconds))
	writePublicTail(b[offNumAddrs:], t.ServerAddrs, &t.ClientToServerKey, &t.ServerToClientKey)
	return dst, nil
}
