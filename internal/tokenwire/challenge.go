package tokenwire

import (
	"encoding/binary"
	"sync"

	"github.com/gonetcode/netcode/internal/aead"
)

// Challenge is the content of a challenge token: the server seals it under a
// key only it knows, the client echoes it back in its connection response,
// and the server learns from it which client answered.
type Challenge struct {
	// ClientID is the id from the client's connect token.
	ClientID uint64
	// UserData is the user data from the client's connect token.
	UserData [UserDataBytes]byte
}

// AppendChallenge appends the 300-byte challenge token for c, sealed with the
// server's challenge key a under the challenge token sequence seq (with empty
// associated data), to dst and returns the result. The plaintext is the
// client id, the user data and zero padding to ChallengePlainBytes. With
// ChallengeTokenBytes of spare capacity in dst it does not allocate.
func AppendChallenge(dst []byte, a *aead.AEAD, seq uint64, c *Challenge) []byte {
	start := len(dst)
	dst = Extend(dst, ChallengeTokenBytes)
	plain := dst[start : start+ChallengePlainBytes]
	binary.LittleEndian.PutUint64(plain, c.ClientID)
	copy(plain[8:], c.UserData[:])
	clear(plain[8+UserDataBytes:])
	a.Seal(plain[:0], seq, plain, nil)
	return dst
}

// chScratch holds decrypted challenge tokens so that OpenChallenge neither
// allocates nor writes to its input. Buffers are wiped before they return
// to the pool.
var chScratch = sync.Pool{New: func() any { return new([ChallengePlainBytes]byte) }}

// OpenChallenge authenticates and decrypts a challenge token sealed with the
// server's challenge key a under sequence seq, and reads it into c. It
// returns an error wrapping ErrInvalid if sealed is not ChallengeTokenBytes
// long, and ErrDecrypt if it does not authenticate. sealed is not modified:
// it is decrypted into scratch space that is wiped afterwards. OpenChallenge
// does not allocate.
func OpenChallenge(a *aead.AEAD, seq uint64, sealed []byte, c *Challenge) error {
	if len(sealed) != ChallengeTokenBytes {
		return ErrLength
	}
	buf := chScratch.Get().(*[ChallengePlainBytes]byte)
	defer func() {
		// Leave no client id or user data behind in the pool.
		clear(buf[:])
		chScratch.Put(buf)
	}()
	plain, err := a.Open(buf[:0], seq, sealed, nil)
	if err != nil {
		return ErrDecrypt
	}
	c.ClientID = binary.LittleEndian.Uint64(plain)
	copy(c.UserData[:], plain[8:8+UserDataBytes])
	return nil
}
