package tokenwire

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/aead"
)

// OpenChallenge decrypts into pooled scratch space; what it returns to the
// pool must hold no client id or user data.
func TestOpenChallengeWipesScratch(t *testing.T) {
	a := aead.New(&crypto.Key{3})
	c := Challenge{ClientID: 0x0102030405060708}
	for i := range c.UserData {
		c.UserData[i] = byte(i) | 0x80
	}
	sealed := AppendChallenge(nil, a, 77, &c)
	zero := make([]byte, ChallengePlainBytes)
	// The pool may drop a buffer or hand out a fresh one (the race detector
	// makes it drop some on purpose), so look a few times.
	for range 20 {
		var got Challenge
		require.NoError(t, OpenChallenge(a, 77, sealed, &got))
		require.Equal(t, c, got)
		buf := chScratch.Get().(*[ChallengePlainBytes]byte)
		ok := assert.Equal(t, zero, buf[:], "scratch returned to the pool unwiped")
		chScratch.Put(buf)
		if !ok {
			break
		}
	}
}
