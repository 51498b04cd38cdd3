package hydro

import (
	"bytes"
	"testing"
)

var testCtx = [ContextBytes]byte{'C', 'U', 'T', 'E', '_', 'C', 'T', 'X'}

// FuzzOpen feeds arbitrary boxes to Open: it never panics, and only a box
// sealed under the key opens.
func FuzzOpen(f *testing.F) {
	var key [KeyBytes]byte
	for i := range key {
		key[i] = byte(i)
	}
	for _, n := range []int{0, 1, 15, 16, 17, 100} {
		box := make([]byte, n+HeaderBytes)
		SealIV(box, bytes.Repeat([]byte{7}, n), 3, &testCtx, &key, &[IVBytes]byte{1})
		f.Add(box, uint64(3))
	}
	f.Add([]byte{}, uint64(0))
	f.Add(make([]byte, HeaderBytes-1), uint64(0))
	f.Fuzz(func(t *testing.T, box []byte, id uint64) {
		msg := make([]byte, max(len(box)-HeaderBytes, 0))
		if Open(msg, box, id, &testCtx, &key) == nil {
			// It opened, so it must be what sealing the plaintext with its
			// SIV's message gives: reseal and compare nothing but the
			// round trip (the SIV binds the plaintext).
			again := make([]byte, len(msg))
			if err := Open(again, box, id, &testCtx, &key); err != nil || !bytes.Equal(again, msg) {
				t.Fatal("a box opened once and not twice")
			}
		}
	})
}

// FuzzTamper seals a message, flips one bit anywhere in the box or changes
// the message id, and requires the box not to open.
func FuzzTamper(f *testing.F) {
	f.Add([]byte("hello"), uint64(0), uint16(0), byte(1), false)
	f.Add([]byte{}, uint64(9), uint16(35), byte(0x80), false)
	f.Add(bytes.Repeat([]byte{1}, 64), uint64(1<<63), uint16(99), byte(0), true)
	f.Fuzz(func(t *testing.T, msg []byte, id uint64, pos uint16, bit byte, otherID bool) {
		var key [KeyBytes]byte
		key[0] = 9
		box := make([]byte, len(msg)+HeaderBytes)
		Seal(box, msg, id, &testCtx, &key)
		openID := id
		if otherID {
			openID = id + 1
		} else {
			if bit == 0 {
				bit = 1
			}
			box[int(pos)%len(box)] ^= bit
		}
		out := make([]byte, len(msg))
		if Open(out, box, openID, &testCtx, &key) == nil {
			t.Fatalf("a tampered box opened (pos %d bit %#x other id %v)", pos, bit, otherID)
		}
	})
}

// FuzzVerify feeds arbitrary signatures and keys to Verify: it never
// panics, and a signature made with a key verifies only for its message.
func FuzzVerify(f *testing.F) {
	var sk [SecretKeyBytes]byte
	var pk [PublicKeyBytes]byte
	KeyPairDeterministic(&sk, &pk, &[SeedBytes]byte{1})
	var sig [SignatureBytes]byte
	SignWith(&sig, []byte("msg"), &testCtx, &sk, &[SignRandBytes]byte{2})
	f.Add(sig[:], pk[:], []byte("msg"))
	f.Add(make([]byte, 64), make([]byte, 32), []byte{})
	f.Fuzz(func(t *testing.T, s, k, msg []byte) {
		if len(s) < SignatureBytes || len(k) < PublicKeyBytes {
			return
		}
		err := Verify((*[SignatureBytes]byte)(s), msg, &testCtx, (*[PublicKeyBytes]byte)(k))
		if err == nil && bytes.Equal(k[:32], pk[:]) && bytes.Equal(s[:64], sig[:]) && string(msg) != "msg" {
			t.Fatal("a signature verified for another message")
		}
	})
}
