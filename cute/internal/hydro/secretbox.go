package hydro

import (
	"crypto/subtle"
	"encoding/binary"
	"errors"
)

// Secretbox sizes.
const (
	KeyBytes    = 32                  // a secretbox key
	IVBytes     = 20                  // the random IV drawn per seal (never sent)
	SIVBytes    = 20                  // the synthetic IV at the start of a box
	MACBytes    = 16                  // the MAC after the SIV
	HeaderBytes = SIVBytes + MACBytes // a box's overhead: SIV ‖ MAC ‖ ciphertext
)

// ErrOpen reports a box that does not authenticate under the key, message
// id and context it was opened with, or that is shorter than HeaderBytes.
var ErrOpen = errors.New("hydro: secretbox does not authenticate")

// secretboxSetup is hydro_secretbox_setup: it absorbs the context, the key,
// the (synthetic) IV and the message id.
func secretboxSetup(buf *[GimliBytes]byte, msgID uint64, ctx *[ContextBytes]byte, key *[KeyBytes]byte, iv *[IVBytes]byte, keyTag byte) {
	*buf = [GimliBytes]byte{6, 's', 'b', 'x', '2', '5', '6', 8}
	copy(buf[8:16], ctx[:])
	Gimli(buf, tagHeader)

	for i := 0; i < gimliRate; i++ {
		buf[i] ^= key[i]
	}
	Gimli(buf, keyTag)
	for i := 0; i < gimliRate; i++ {
		buf[i] ^= key[gimliRate+i]
	}
	Gimli(buf, keyTag)

	buf[0] ^= IVBytes
	for i := 0; i < gimliRate-1; i++ {
		buf[1+i] ^= iv[i]
	}
	Gimli(buf, tagHeader)
	for i := 0; i < IVBytes-(gimliRate-1); i++ {
		buf[i] ^= iv[gimliRate-1+i]
	}
	var id [8]byte
	binary.LittleEndian.PutUint64(id[:], msgID)
	for i := range id {
		buf[IVBytes-gimliRate+i] ^= id[i]
	}
	Gimli(buf, tagHeader)
}

// secretboxFinal is hydro_secretbox_final: it mixes the key into the
// capacity twice.
func secretboxFinal(buf *[GimliBytes]byte, key *[KeyBytes]byte, tag byte) {
	for i := range key {
		buf[gimliRate+i] ^= key[i]
	}
	Gimli(buf, tag)
	for i := range key {
		buf[gimliRate+i] ^= key[i]
	}
	Gimli(buf, tag)
}

// crypt is the second pass's duplex (hydro_secretbox_xor_enc and _xor_dec):
// out = in XOR keystream, absorbing the ciphertext (out when encrypting,
// in when decrypting), then the padding. Each input byte is read before
// its output byte is written, so out may sit exactly on in or before it.
func crypt(buf *[GimliBytes]byte, out, in []byte, decrypt bool) {
	i := 0
	for ; i < len(in); i++ {
		j := i % gimliRate
		if i > 0 && j == 0 {
			Gimli(buf, tagPayload)
		}
		c := in[i]
		o := c ^ buf[j]
		out[i] = o
		if decrypt {
			buf[j] = c
		} else {
			buf[j] = o
		}
	}
	left := len(in) % gimliRate
	if len(in) > 0 && left == 0 {
		Gimli(buf, tagPayload)
	}
	pad(buf, left, domainAEAD)
	Gimli(buf, tagPayload)
}

// SealIV is hydro_secretbox_encrypt with an explicit IV: it writes
// SIV ‖ MAC ‖ ciphertext of msg into box, which must be exactly
// len(msg)+HeaderBytes long. box and msg must not overlap, except that the
// ciphertext may sit exactly on msg (box[HeaderBytes:] == msg).
//
// The IV must be fresh random bytes for every seal (see Seal); a repeated
// IV with the same key, message id and message gives the same box.
func SealIV(box, msg []byte, msgID uint64, ctx *[ContextBytes]byte, key *[KeyBytes]byte, iv *[IVBytes]byte) {
	if len(box) != len(msg)+HeaderBytes {
		panic("hydro: SealIV box length is not len(msg)+HeaderBytes")
	}
	var buf [GimliBytes]byte

	// First pass: the SIV, from the IV and the whole message.
	secretboxSetup(&buf, msgID, ctx, key, iv, tagKey0)
	m := msg
	for len(m) >= gimliRate {
		for i := 0; i < gimliRate; i++ {
			buf[i] ^= m[i]
		}
		Gimli(&buf, tagPayload)
		m = m[gimliRate:]
	}
	for i := range m {
		buf[i] ^= m[i]
	}
	pad(&buf, len(m), domainXOF)
	Gimli(&buf, tagPayload)
	secretboxFinal(&buf, key, tagFinal0)
	var siv [SIVBytes]byte
	copy(siv[:], buf[gimliRate:gimliRate+SIVBytes])

	// Second pass: encrypt with the SIV in place of the IV, then the MAC.
	secretboxSetup(&buf, msgID, ctx, key, &siv, tagKey)
	crypt(&buf, box[HeaderBytes:], msg, false)
	secretboxFinal(&buf, key, tagFinal)
	copy(box[SIVBytes:HeaderBytes], buf[gimliRate:gimliRate+MACBytes])
	copy(box[:SIVBytes], siv[:])
	clear(buf[:])
}

// Open is hydro_secretbox_decrypt: it checks box (SIV ‖ MAC ‖ ciphertext)
// and writes the plaintext into msg, which must be exactly
// len(box)-HeaderBytes long. msg may overlap box if it starts at or before
// the ciphertext (as the protocol decrypts in place, 36 bytes back). On
// failure msg is zeroed and ErrOpen returned. The MAC comparison takes the
// same time whatever the bytes.
func Open(msg, box []byte, msgID uint64, ctx *[ContextBytes]byte, key *[KeyBytes]byte) error {
	if len(box) < HeaderBytes {
		return ErrOpen
	}
	if len(msg) != len(box)-HeaderBytes {
		panic("hydro: Open msg length is not len(box)-HeaderBytes")
	}
	var siv [SIVBytes]byte
	var mac [MACBytes]byte
	copy(siv[:], box[:SIVBytes])
	copy(mac[:], box[SIVBytes:HeaderBytes])
	ct := box[HeaderBytes:]
	var buf [GimliBytes]byte
	secretboxSetup(&buf, msgID, ctx, key, &siv, tagKey)
	crypt(&buf, msg, ct, true)
	secretboxFinal(&buf, key, tagFinal)
	ok := subtle.ConstantTimeCompare(buf[gimliRate:gimliRate+MACBytes], mac[:])
	clear(buf[:])
	if ok != 1 {
		clear(msg)
		return ErrOpen
	}
	return nil
}
