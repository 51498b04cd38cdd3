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

// secretboxHeader starts hydro_secretbox_setup: it absorbs the
// construction's name and the context.
func secretboxHeader(buf *[GimliBytes]byte, ctx *[ContextBytes]byte) {
	*buf = [GimliBytes]byte{6, 's', 'b', 'x', '2', '5', '6', 8}
	copy(buf[8:16], ctx[:])
	permute(buf, tagHeader)
}

// secretboxIV is the rest of hydro_secretbox_setup, after the header and
// the key (BoxKey's states): it absorbs the (synthetic) IV and the message
// id.
func secretboxIV(buf *[GimliBytes]byte, msgID uint64, iv *[IVBytes]byte) {
	buf[0] ^= IVBytes
	xorBytes(buf[1:], iv[:gimliRate-1])
	permute(buf, tagHeader)
	xorBytes(buf[:], iv[gimliRate-1:])
	// libhydrogen XORs the id in from byte 4, over the IV's last byte.
	const idAt = IVBytes - gimliRate
	binary.LittleEndian.PutUint64(buf[idAt:], binary.LittleEndian.Uint64(buf[idAt:])^msgID)
	permute(buf, tagHeader)
}

// BoxKey is a secretbox key with, for one context, the states every
// seal's and open's setup reaches before it absorbs an IV: the
// construction's header and the key absorbed under each pass's key tag.
// Those states depend on the key and the context only, so a key used for
// many boxes (a connection's packet key) computes them once (Set) and each
// box then starts from them: 5 of the 27 permutations of a 100-byte seal
// and 3 of the 14 of an open are saved. The zero value is not usable.
type BoxKey struct {
	key  [KeyBytes]byte
	siv  [GimliBytes]byte // after the header and the key under tagKey0: the first pass of a seal
	pass [GimliBytes]byte // after the header and the key under tagKey: the second pass, and an open
}

// Set makes k the key key for context ctx.
func (k *BoxKey) Set(key *[KeyBytes]byte, ctx *[ContextBytes]byte) {
	k.key = *key
	secretboxHeader(&k.pass, ctx)
	k.siv = k.pass
	absorbBlocks(&k.siv, tagKey0, key[:])
	absorbBlocks(&k.pass, tagKey, key[:])
}

// Key returns the key k was Set to.
func (k *BoxKey) Key() *[KeyBytes]byte { return &k.key }

// Clear zeroes k.
func (k *BoxKey) Clear() { *k = BoxKey{} }

// secretboxFinal is hydro_secretbox_final: it mixes the key into the
// capacity twice.
func secretboxFinal(buf *[GimliBytes]byte, key *[KeyBytes]byte, tag byte) {
	for range 2 {
		for i := 0; i < KeyBytes; i += 8 {
			w := binary.LittleEndian.Uint64(buf[gimliRate+i:]) ^ binary.LittleEndian.Uint64(key[i:])
			binary.LittleEndian.PutUint64(buf[gimliRate+i:], w)
		}
		permute(buf, tag)
	}
}

// crypt is the second pass's duplex (hydro_secretbox_xor_enc and _xor_dec):
// out = in XOR keystream, absorbing the ciphertext (out when encrypting,
// in when decrypting), then the padding. Whole blocks go through the
// assembly's loop; each input block is read before its output is written,
// so out may sit exactly on in or before it.
func crypt(buf *[GimliBytes]byte, out, in []byte, decrypt bool) {
	whole := len(in) &^ (gimliRate - 1)
	if decrypt {
		decryptBlocks(buf, tagPayload, out, in[:whole])
	} else {
		encryptBlocks(buf, tagPayload, out, in[:whole])
	}
	in, out = in[whole:], out[whole:len(in)]
	for i, c := range in {
		o := c ^ buf[i]
		out[i] = o
		if decrypt {
			buf[i] = c
		} else {
			buf[i] = o
		}
	}
	pad(buf, len(in), domainAEAD)
	permute(buf, tagPayload)
}

// SealIV is hydro_secretbox_encrypt with an explicit IV: it writes
// SIV ‖ MAC ‖ ciphertext of msg into box, which must be exactly
// len(msg)+HeaderBytes long. box and msg must not overlap, except that the
// ciphertext may sit exactly on msg (box[HeaderBytes:] == msg).
//
// The IV must be fresh random bytes for every seal (see Seal); a repeated
// IV with the same key, message id and message gives the same box. A key
// that seals many boxes is better made a BoxKey once (BoxKey.SealIV).
func SealIV(box, msg []byte, msgID uint64, ctx *[ContextBytes]byte, key *[KeyBytes]byte, iv *[IVBytes]byte) {
	var k BoxKey
	k.Set(key, ctx)
	k.SealIV(box, msg, msgID, iv)
	k.Clear()
}

// SealIV is the package's SealIV with the key and context of k.
func (k *BoxKey) SealIV(box, msg []byte, msgID uint64, iv *[IVBytes]byte) {
	if len(box) != len(msg)+HeaderBytes {
		panic("hydro: SealIV box length is not len(msg)+HeaderBytes")
	}
	// First pass: the SIV, from the IV and the whole message, written
	// straight into the box (before the ciphertext, so not over msg).
	buf := k.siv
	secretboxIV(&buf, msgID, iv)
	whole := len(msg) &^ (gimliRate - 1)
	absorbBlocks(&buf, tagPayload, msg[:whole])
	n := xorBytes(buf[:], msg[whole:])
	pad(&buf, n, domainXOF)
	permute(&buf, tagPayload)
	secretboxFinal(&buf, &k.key, tagFinal0)
	siv := (*[SIVBytes]byte)(box[:SIVBytes])
	copy(siv[:], buf[gimliRate:gimliRate+SIVBytes])

	// Second pass: encrypt with the SIV in place of the IV, then the MAC.
	buf = k.pass
	secretboxIV(&buf, msgID, siv)
	crypt(&buf, box[HeaderBytes:], msg, false)
	secretboxFinal(&buf, &k.key, tagFinal)
	copy(box[SIVBytes:HeaderBytes], buf[gimliRate:gimliRate+MACBytes])
	clear(buf[:])
}

// Open is hydro_secretbox_decrypt: it checks box (SIV ‖ MAC ‖ ciphertext)
// and writes the plaintext into msg, which must be exactly
// len(box)-HeaderBytes long. msg may overlap box if it starts at or before
// the ciphertext (as the protocol decrypts in place, 36 bytes back). On
// failure msg is zeroed and ErrOpen returned. The MAC comparison takes the
// same time whatever the bytes. A key that opens many boxes is better made
// a BoxKey once (BoxKey.Open).
func Open(msg, box []byte, msgID uint64, ctx *[ContextBytes]byte, key *[KeyBytes]byte) error {
	var start [GimliBytes]byte
	secretboxHeader(&start, ctx)
	absorbBlocks(&start, tagKey, key[:])
	err := open(msg, box, msgID, &start, key)
	clear(start[:])
	return err
}

// Open is the package's Open with the key and context of k.
func (k *BoxKey) Open(msg, box []byte, msgID uint64) error {
	return open(msg, box, msgID, &k.pass, &k.key)
}

// open is Open from start, the state after the header and key.
func open(msg, box []byte, msgID uint64, start *[GimliBytes]byte, key *[KeyBytes]byte) error {
	if len(box) < HeaderBytes {
		return ErrOpen
	}
	if len(msg) != len(box)-HeaderBytes {
		panic("hydro: Open msg length is not len(box)-HeaderBytes")
	}
	// The header is kept aside: msg may overwrite it.
	var siv [SIVBytes]byte
	var mac [MACBytes]byte
	copy(siv[:], box[:SIVBytes])
	copy(mac[:], box[SIVBytes:HeaderBytes])
	buf := *start
	secretboxIV(&buf, msgID, &siv)
	crypt(&buf, msg, box[HeaderBytes:], true)
	secretboxFinal(&buf, key, tagFinal)
	ok := subtle.ConstantTimeCompare(buf[gimliRate:gimliRate+MACBytes], mac[:])
	clear(buf[:])
	if ok != 1 {
		clear(msg)
		return ErrOpen
	}
	return nil
}
