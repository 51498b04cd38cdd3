package vectortest

import (
	"encoding/binary"

	"github.com/gonetcode/netcode/internal/aead"
)

// PacketAD returns the associated data netcode binds to an encrypted packet:
// the version info, the protocol id and the prefix byte, written out here
// independently of package crypto so that the vectors check it.
func PacketAD(protocolID uint64, prefix byte) []byte {
	ad := binary.LittleEndian.AppendUint64([]byte(aead.VersionInfo), protocolID)
	return append(ad, prefix)
}

// TokenAD returns the associated data bound to a connect token's private
// part: the version info, the protocol id and the expire timestamp.
func TokenAD(protocolID, expireTimestamp uint64) []byte {
	ad := binary.LittleEndian.AppendUint64([]byte(aead.VersionInfo), protocolID)
	return binary.LittleEndian.AppendUint64(ad, expireTimestamp)
}
