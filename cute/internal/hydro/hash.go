package hydro

import "errors"

// ContextBytes is the size of a libhydrogen context string.
const ContextBytes = 8

// HashKeyBytes is the size of a hydro_hash key.
const HashKeyBytes = 32

// HashBytesMin and HashBytesMax bound a hydro_hash output length.
const (
	HashBytesMin = 16
	HashBytesMax = 65535
)

// ErrHashLength reports a hydro_hash output length outside
// [HashBytesMin, HashBytesMax].
var ErrHashLength = errors.New("hydro: hash output length out of range")

// Hash is a hydro_hash state: a Gimli sponge keyed (or not) and bound to a
// context. The zero value is not usable; start with NewHash.
type Hash struct {
	state [GimliBytes]byte
	off   int
}

// NewHash returns a hash state for context ctx, keyed with key when key is
// not nil (hydro_hash_init).
func NewHash(ctx *[ContextBytes]byte, key *[HashKeyBytes]byte) Hash {
	var h Hash
	var block [64]byte
	block[0], block[1], block[2], block[3], block[4], block[5] = 4, 'k', 'm', 'a', 'c', 8
	copy(block[6:14], ctx[:])
	n := 32
	if key != nil {
		block[gimliRate] = HashKeyBytes
		copy(block[gimliRate+1:], key[:])
		n = 64
	}
	h.Write(block[:n])
	clear(block[:])
	return h
}

// Write absorbs p (hydro_hash_update). It never fails. Whole blocks are
// absorbed straight from p, the state in registers from one to the next.
func (h *Hash) Write(p []byte) {
	if h.off > 0 {
		n := min(len(p), gimliRate-h.off)
		xorBytes(h.state[h.off:], p[:n])
		p = p[n:]
		h.off += n
		if h.off < gimliRate {
			return
		}
		permute(&h.state, 0)
		h.off = 0
	}
	whole := len(p) &^ (gimliRate - 1)
	absorbBlocks(&h.state, 0, p[:whole])
	h.off = xorBytes(h.state[:], p[whole:])
}

// Sum writes len(out) bytes of output (hydro_hash_final). The state must
// not be used afterwards.
func (h *Hash) Sum(out []byte) error {
	n := len(out)
	if n < HashBytesMin || n > HashBytesMax {
		return ErrHashLength
	}
	var lc [4]byte
	lc[1] = byte(n)
	lc[2] = byte(n >> 8)
	lcLen := 1
	if lc[2] != 0 {
		lcLen = 2
	}
	lc[0] = byte(lcLen)
	h.Write(lc[:1+lcLen+1])
	pad(&h.state, h.off, domainXOF)
	for len(out) > 0 {
		permute(&h.state, 0)
		out = out[copy(out, h.state[:gimliRate]):]
	}
	clear(h.state[:])
	return nil
}

// HashSum is hydro_hash_hash: out = hash(msg) for context ctx, keyed with
// key when it is not nil.
func HashSum(out, msg []byte, ctx *[ContextBytes]byte, key *[HashKeyBytes]byte) error {
	if len(out) < HashBytesMin || len(out) > HashBytesMax {
		return ErrHashLength
	}
	h := NewHash(ctx, key)
	h.Write(msg)
	return h.Sum(out)
}
