package wire

import (
	"errors"
	"net/netip"

	"github.com/gonetcode/netcode/cute/internal/hydro"
)

// Address types in a token's endpoint list.
const (
	addrIPv4  = 1
	addrIPv6  = 2
	ipv4Bytes = 1 + 4 + 2
	ipv6Bytes = 1 + 16 + 2
	// endpointsAt is where the endpoint list starts in the token packet.
	endpointsAt = 35
)

// Errors of the token readers and writer. The code's messages are in the
// comments.
var (
	ErrTokenSize      = errors.New("cute: connect token has the wrong size")
	ErrTokenType      = errors.New("cute: connect token packet type is not 0")        // "Expected packet type to be CN_PROTOCOL_PACKET_TYPE_CONNECT_TOKEN."
	ErrVersion        = errors.New("cute: connect token is not CUTE 1.00")            // "Unable to find `CN_PROTOCOL_VERSION_STRING` string."
	ErrApplicationID  = errors.New("cute: connect token is for another application")  // "Found invalid application id."
	ErrExpired        = errors.New("cute: connect token expired")                     // "Packet has expired." / "Invalid timestamp."
	ErrEndpointCount  = errors.New("cute: connect token endpoint count is not 1..32") // "Invalid endpoint count."
	ErrEndpoints      = errors.New("cute: connect token endpoints overflow the public section")
	ErrEndpointType   = errors.New("cute: connect token endpoint has an unknown address type")
	ErrSignature      = errors.New("cute: connect token signature does not verify")       // "Failed authentication."
	ErrSecret         = errors.New("cute: connect token secret section does not decrypt") // "Failed decryption."
	ErrCreatedExpired = errors.New("cute: connect token created after it expires")
)

// endpointBytes is the size of an endpoint's encoding.
func endpointBytes(a netip.AddrPort) int {
	if a.Addr().Is4() {
		return ipv4Bytes
	}
	return ipv6Bytes
}

// appendEndpoint writes a in the code's encoding: the type, the address
// (IPv4 bytes in order; IPv6 as eight little-endian u16 groups) and the
// port, little-endian.
func appendEndpoint(b []byte, a netip.AddrPort) int {
	ip := a.Addr()
	if ip.Is4() {
		v := ip.As4()
		b[0] = addrIPv4
		copy(b[1:5], v[:])
		le.PutUint16(b[5:], a.Port())
		return ipv4Bytes
	}
	v := ip.As16()
	b[0] = addrIPv6
	for i := 0; i < 8; i++ {
		le.PutUint16(b[1+2*i:], uint16(v[2*i])<<8|uint16(v[2*i+1]))
	}
	le.PutUint16(b[17:], a.Port())
	return ipv6Bytes
}

// readEndpoint decodes the endpoint at the start of b, which is at least
// 1 byte long. It returns the endpoint, its size, and whether its type is
// known; an unknown type is reported, not guessed at, and its size taken as
// an IPv4 one so that a list still parses (the caller refuses it later).
func readEndpoint(b []byte) (netip.AddrPort, int, bool) {
	switch b[0] {
	case addrIPv4:
		if len(b) < ipv4Bytes {
			return netip.AddrPort{}, ipv4Bytes, true
		}
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[1:5])), le.Uint16(b[5:])), ipv4Bytes, true
	case addrIPv6:
		if len(b) < ipv6Bytes {
			return netip.AddrPort{}, ipv6Bytes, true
		}
		var v [16]byte
		for i := 0; i < 8; i++ {
			g := le.Uint16(b[1+2*i:])
			v[2*i], v[2*i+1] = byte(g>>8), byte(g)
		}
		return netip.AddrPortFrom(netip.AddrFrom16(v), le.Uint16(b[17:])), ipv6Bytes, true
	}
	return netip.AddrPort{}, ipv4Bytes, false
}

// TokenParams are the inputs of a connect token (cn_generate_connect_token).
type TokenParams struct {
	ApplicationID    uint64
	Created, Expires uint64 // Unix seconds
	HandshakeTimeout uint32 // seconds
	Endpoints        []netip.AddrPort
	ClientID         uint64
	ClientToServer   Key
	ServerToClient   Key
	UserData         [UserDataBytes]byte
}

// Errors of WriteToken.
var (
	ErrTooManyEndpoints = errors.New("cute: endpoints do not fit the connect token's public section (at most 32 IPv4, 28 IPv6)")
	ErrBadEndpoint      = errors.New("cute: endpoint is not a valid IPv4 or IPv6 address and port")
)

// WriteToken writes a connect token into dst: the REST section, then the
// connect token packet with its public section, the secret section sealed
// with iv under the first 32 bytes of sk, and the signature of both made
// with the randomness r. The output is a function of its inputs: the
// caller draws iv and r from crypto/rand (see package cute).
func WriteToken(dst *[TokenBytes]byte, p *TokenParams, sk *[hydro.SecretKeyBytes]byte, iv *IV, r *[hydro.SignRandBytes]byte) error {
	switch {
	case len(p.Endpoints) < 1 || len(p.Endpoints) > MaxEndpoints:
		return ErrEndpointCount
	case p.Created > p.Expires:
		return ErrCreatedExpired
	}
	n := endpointsAt
	for _, a := range p.Endpoints {
		if !a.IsValid() || a.Addr().Zone() != "" {
			return ErrBadEndpoint
		}
		n += endpointBytes(netip.AddrPortFrom(a.Addr().Unmap(), a.Port()))
	}
	if n > PublicBytes {
		return ErrTooManyEndpoints
	}
	*dst = [TokenBytes]byte{}
	rest := dst[:RESTBytes]
	copy(rest, Version)
	le.PutUint64(rest[10:], p.ApplicationID)
	le.PutUint64(rest[18:], p.Created)
	copy(rest[26:58], p.ClientToServer[:])
	copy(rest[58:90], p.ServerToClient[:])

	pkt := dst[RESTBytes:]
	pkt[0] = byte(ConnectToken)
	copy(pkt[1:], Version)
	le.PutUint64(pkt[11:], p.ApplicationID)
	le.PutUint64(pkt[19:], p.Expires)
	le.PutUint32(pkt[27:], p.HandshakeTimeout)
	le.PutUint32(pkt[31:], uint32(len(p.Endpoints)))
	at := endpointsAt
	for _, a := range p.Endpoints {
		at += appendEndpoint(pkt[at:], netip.AddrPortFrom(a.Addr().Unmap(), a.Port()))
	}

	// The secret plaintext, sealed in place right after the 36-byte
	// secretbox header: 28 zero bytes, client id, both keys, user data.
	plain := pkt[PublicBytes+hydro.HeaderBytes : PublicBytes+SecretBytes]
	le.PutUint64(plain[secretZeroBytes:], p.ClientID)
	copy(plain[36:68], p.ClientToServer[:])
	copy(plain[68:100], p.ServerToClient[:])
	copy(plain[100:], p.UserData[:])
	var key Key
	copy(key[:], sk[:KeyBytes])
	hydro.SealIV(pkt[PublicBytes:PublicBytes+SecretBytes], plain, 0, &Context, &key, iv)
	clear(key[:])

	var sig [SignatureBytes]byte
	hydro.SignWith(&sig, pkt[:signedBytes], &Context, sk, r)
	copy(pkt[signedBytes:], sig[:])
	return nil
}

// publicSection is what both readers take from a token packet's public
// section.
type publicSection struct {
	expires   uint64
	handshake uint32
	count     int
	endpoints [MaxEndpoints]netip.AddrPort
	badType   bool // an endpoint of unknown type
}

// readPublic reads the public section of the 1024-byte token packet pkt as
// cn_protocol_read_connect_token_packet_public_section does, in its order:
// type, version, application id, expiry (expiration < now fails), count,
// endpoints. It does not read past the 568 bytes of the section, where the
// code does (an endpoint list too long for it is refused here). Unknown
// address types are noted, for the caller to refuse once it trusts the
// bytes.
func readPublic(pkt []byte, appID, now uint64, s *publicSection) error {
	if pkt[0] != byte(ConnectToken) {
		return ErrTokenType
	}
	if string(pkt[1:1+VersionBytes]) != Version {
		return ErrVersion
	}
	if le.Uint64(pkt[11:]) != appID {
		return ErrApplicationID
	}
	s.expires = le.Uint64(pkt[19:])
	if s.expires < now {
		return ErrExpired
	}
	s.handshake = le.Uint32(pkt[27:])
	count := le.Uint32(pkt[31:])
	if count < 1 || count > MaxEndpoints {
		return ErrEndpointCount
	}
	s.count = int(count)
	s.badType = false
	at := endpointsAt
	for i := 0; i < s.count; i++ {
		if at >= PublicBytes {
			return ErrEndpoints
		}
		a, n, ok := readEndpoint(pkt[at:PublicBytes])
		if at+n > PublicBytes {
			return ErrEndpoints
		}
		s.endpoints[i] = a
		s.badType = s.badType || !ok
		at += n
	}
	return nil
}

// ClientToken is a connect token as a client reads it. The client cannot
// check the signature (it has no key for it); the server does.
type ClientToken struct {
	ApplicationID    uint64
	Created, Expires uint64
	HandshakeTimeout uint32
	Endpoints        []netip.AddrPort
	ClientToServer   Key
	ServerToClient   Key
	// Packet is the connect token packet, sent to the server verbatim.
	Packet [TokenPacketBytes]byte
}

// ReadClientToken reads a 1114-byte connect token as
// cn_protocol_client_read_connect_token_from_web_service does: the REST
// version and application id, then the public section with the expiry
// tested against now (a token expiring before now is refused; the code
// passes 0 on a fresh client, which refuses nothing). Beyond the code, it
// refuses a token created after it expires, an endpoint of unknown address
// type and an endpoint list that overflows the public section.
func ReadClientToken(b []byte, appID, now uint64, t *ClientToken) error {
	if len(b) != TokenBytes {
		return ErrTokenSize
	}
	if string(b[:VersionBytes]) != Version {
		return ErrVersion
	}
	if le.Uint64(b[10:]) != appID {
		return ErrApplicationID
	}
	var s publicSection
	pkt := b[RESTBytes:]
	if err := readPublic(pkt, appID, now, &s); err != nil {
		return err
	}
	if s.badType {
		return ErrEndpointType
	}
	created := le.Uint64(b[18:])
	if created > s.expires {
		return ErrCreatedExpired
	}
	*t = ClientToken{
		ApplicationID:    appID,
		Created:          created,
		Expires:          s.expires,
		HandshakeTimeout: s.handshake,
		Endpoints:        append([]netip.AddrPort(nil), s.endpoints[:s.count]...),
	}
	copy(t.ClientToServer[:], b[26:58])
	copy(t.ServerToClient[:], b[58:90])
	copy(t.Packet[:], pkt)
	return nil
}

// ServerToken is a connect token packet as the server reads it.
type ServerToken struct {
	Expires          uint64
	HandshakeTimeout uint32
	EndpointCount    int
	Endpoints        [MaxEndpoints]netip.AddrPort
	ClientID         uint64
	ClientToServer   Key
	ServerToClient   Key
	UserData         [UserDataBytes]byte
	// ID names the token for the server's history of consumed tokens: the
	// secretbox SIV and MAC of its secret section, which a valid signature
	// binds and which differ for every token made (its IV is random).
	// The code keys its cache on the 64 signature bytes instead, which
	// are not unique per token: libhydrogen's x-only verification accepts
	// other encodings of a signature.
	ID [hydro.HeaderBytes]byte
}

// ReadServerToken reads a connect token packet as
// cn_protocol_server_decrypt_connect_token_packet does: the public section
// (see readPublic), an expiry that must be after now, the signature over
// the first 960 bytes with pk, then the secret section opened with the
// first 32 bytes of sk. Beyond the code, it refuses endpoints of unknown
// address type, but only after the signature verified (the code asserts on
// them before, crashing debug builds on unauthenticated bytes), and reads
// the user data from its place in the plaintext (the code reads it 36 bytes
// too far). It allocates nothing.
func ReadServerToken(pkt []byte, pk *[hydro.PublicKeyBytes]byte, sk *[hydro.SecretKeyBytes]byte, appID, now uint64, t *ServerToken) error {
	if len(pkt) != TokenPacketBytes {
		return ErrTokenSize
	}
	var s publicSection
	if err := readPublic(pkt, appID, now, &s); err != nil {
		return err
	}
	if s.expires <= now {
		return ErrExpired
	}
	if hydro.Verify((*[SignatureBytes]byte)(pkt[signedBytes:]), pkt[:signedBytes], &Context, pk) != nil {
		return ErrSignature
	}
	var plain [secretPlainBytes]byte
	var key Key
	copy(key[:], sk[:KeyBytes])
	err := hydro.Open(plain[:], pkt[PublicBytes:PublicBytes+SecretBytes], 0, &Context, &key)
	clear(key[:])
	if err != nil {
		return ErrSecret
	}
	if s.badType {
		clear(plain[:])
		return ErrEndpointType
	}
	t.Expires = s.expires
	t.HandshakeTimeout = s.handshake
	t.EndpointCount = s.count
	t.Endpoints = s.endpoints
	t.ClientID = le.Uint64(plain[secretZeroBytes:])
	copy(t.ClientToServer[:], plain[36:68])
	copy(t.ServerToClient[:], plain[68:100])
	copy(t.UserData[:], plain[100:])
	copy(t.ID[:], pkt[PublicBytes:PublicBytes+hydro.HeaderBytes])
	clear(plain[:])
	return nil
}
