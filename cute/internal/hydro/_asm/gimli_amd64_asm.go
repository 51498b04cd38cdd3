// Command _asm generates gimli_amd64.s, the Gimli permutation in amd64
// assembly, with avo (as golang.org/x/crypto generates its assembly). It
// lives in a module of its own so that avo never enters the netcode
// module's build graph. Regenerate with `go generate` in this directory.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

//go:generate go run . -out ../gimli_amd64.s -stubs ../gimli_amd64_stubs.go -pkg hydro

// The state is three rows of four little-endian words, one row per vector
// register: x (words 0-3), y (4-7) and z (8-11). A round applies the
// SP-box to the four columns at once; the small swap (with the round
// constant in word 0) and the big swap permute the words of x.
//
// Three variants of the same 24 unrolled rounds, chosen at run time:
// SSE2 (every amd64), AVX (three-operand VEX forms, VPSHUFB for the
// rotation by 24) and AVX-512VL (VPROLD rotations and VPTERNLOGD for the
// three-way XORs).

// isa emits one SP-box on the three rows and returns the new rows.
type isa interface {
	setup()
	spbox(x, y, z VecVirtual) (VecVirtual, VecVirtual, VecVirtual)
	shuffle(imm uint8, x VecVirtual)
	xor(src, dst VecVirtual)
	load(m Mem, x VecVirtual)
	store(x VecVirtual, m Mem)
	movq(r GPVirtual, x VecVirtual)
	shiftBytes(n uint8, x VecVirtual)
	move(src, dst VecVirtual)
}

// sse2 uses only SSE2: shifts and ORs for the rotations, two-operand forms.
type sse2 struct{}

func (sse2) setup() {}

// rotate rotates each word of v left by n bits: two shifts and an OR.
func (sse2) rotate(v VecVirtual, n uint8) {
	t := XMM()
	MOVO(v, t)
	PSLLL(U8(n), v)
	PSRLL(U8(32-n), t)
	POR(t, v)
}

func (s sse2) spbox(x, y, z VecVirtual) (VecVirtual, VecVirtual, VecVirtual) {
	s.rotate(x, 24)
	s.rotate(y, 9)

	// The terms that do not wait on the AND or OR are XORed first, so
	// that each new row is one XOR after its shift.
	// z' = (x ^ (z << 1)) ^ ((y & z) << 2)
	a := XMM()
	MOVO(z, a)
	PADDL(z, a)
	PXOR(x, a)
	nz := XMM()
	MOVO(y, nz)
	PAND(z, nz)
	PSLLL(U8(2), nz)
	PXOR(a, nz)
	// y' = (y ^ x) ^ ((x | z) << 1)
	ny := XMM()
	MOVO(x, ny)
	POR(z, ny)
	PADDL(ny, ny)
	b := XMM()
	MOVO(x, b)
	PXOR(y, b)
	PXOR(b, ny)
	// x' = (z ^ y) ^ ((x & y) << 3), in x's register
	PXOR(y, z)
	PAND(y, x)
	PSLLL(U8(3), x)
	PXOR(z, x)
	return x, ny, nz
}

func (sse2) shuffle(imm uint8, x VecVirtual)  { PSHUFD(U8(imm), x, x) }
func (sse2) xor(src, dst VecVirtual)          { PXOR(src, dst) }
func (sse2) load(m Mem, x VecVirtual)         { MOVOU(m, x) }
func (sse2) store(x VecVirtual, m Mem)        { MOVOU(x, m) }
func (sse2) movq(r GPVirtual, x VecVirtual)   { MOVQ(r, x) }
func (sse2) shiftBytes(n uint8, x VecVirtual) { PSLLDQ(U8(n), x) }
func (sse2) move(src, dst VecVirtual)         { MOVO(src, dst) }

// avx uses the VEX forms: three operands, and VPSHUFB for the rotation by
// 24, a whole-byte rotation.
type avx struct{ rot24 VecVirtual }

func (a *avx) setup() {
	a.rot24 = XMM()
	VMOVDQU(rot24Mask, a.rot24)
}

func (a *avx) spbox(x, y, z VecVirtual) (VecVirtual, VecVirtual, VecVirtual) {
	VPSHUFB(a.rot24, x, x)
	u := XMM()
	VPSRLD(U8(23), y, u)
	VPSLLD(U8(9), y, y)
	VPOR(u, y, y)

	t := XMM()
	VPADDD(z, z, t)
	VPXOR(x, t, t)
	nz := XMM()
	VPAND(y, z, nz)
	VPSLLD(U8(2), nz, nz)
	VPXOR(t, nz, nz)
	ny := XMM()
	VPOR(x, z, ny)
	VPADDD(ny, ny, ny)
	v := XMM()
	VPXOR(x, y, v)
	VPXOR(v, ny, ny)
	VPXOR(y, z, z)
	VPAND(y, x, x)
	VPSLLD(U8(3), x, x)
	VPXOR(z, x, x)
	return x, ny, nz
}

func (*avx) shuffle(imm uint8, x VecVirtual)  { VPSHUFD(U8(imm), x, x) }
func (*avx) xor(src, dst VecVirtual)          { VPXOR(src, dst, dst) }
func (*avx) load(m Mem, x VecVirtual)         { VMOVDQU(m, x) }
func (*avx) store(x VecVirtual, m Mem)        { VMOVDQU(x, m) }
func (*avx) movq(r GPVirtual, x VecVirtual)   { VMOVQ(r, x) }
func (*avx) shiftBytes(n uint8, x VecVirtual) { VPSLLDQ(U8(n), x, x) }
func (*avx) move(src, dst VecVirtual)         { VMOVDQA(src, dst) }

// avx512 uses AVX-512VL on 128-bit registers: VPROLD rotates in one
// instruction and VPTERNLOGD (truth table 0x96) XORs three registers.
type avx512 struct{ avx }

func (*avx512) setup() {}

func (*avx512) spbox(x, y, z VecVirtual) (VecVirtual, VecVirtual, VecVirtual) {
	VPROLD(U8(24), x, x)
	VPROLD(U8(9), y, y)

	nz := XMM()
	VPAND(y, z, nz)
	VPSLLD(U8(2), nz, nz)
	t := XMM()
	VPADDD(z, z, t)
	VPTERNLOGD(U8(0x96), x, t, nz)
	ny := XMM()
	VPOR(x, z, ny)
	VPADDD(ny, ny, ny)
	VPTERNLOGD(U8(0x96), y, x, ny)
	VPAND(y, x, x)
	VPSLLD(U8(3), x, x)
	VPTERNLOGD(U8(0x96), z, y, x)
	return x, ny, nz
}

var rot24Mask Mem

func main() {
	ConstraintExpr("amd64,gc,!purego")

	// rotl(w, 24) = rotr(w, 8): byte i of each word takes byte i+1 mod 4.
	rot24Mask = GLOBL("gimliRot24", RODATA|NOPTR)
	for i := 0; i < 16; i++ {
		DATA(i, U8(i&^3|(i+1)&3))
	}

	for _, v := range []struct {
		suffix, doc string
		isa         func() isa
	}{
		{"SSE2", "SSE2", func() isa { return sse2{} }},
		{"AVX", "AVX", func() isa { return &avx{} }},
		{"AVX512", "AVX-512VL", func() isa { return &avx512{} }},
	} {
		permutation("gimli"+v.suffix, v.doc, v.isa())
		blocks("absorb"+v.suffix, v.doc, v.isa(), absorb)
		blocks("encrypt"+v.suffix, v.doc, v.isa(), encrypt)
		blocks("decrypt"+v.suffix, v.doc, v.isa(), decrypt)
	}
	Generate()
}

// permutation emits func(state *[48]byte, tag byte): one permutation.
func permutation(name, doc string, s isa) {
	TEXT(name, NOSPLIT, "func(state *[48]byte, tag byte)")
	Pragma("noescape")
	Doc(name + " XORs tag into the last byte of state and applies the Gimli permutation to its 12 little-endian words, with " + doc + ".")
	p := Mem{Base: Load(Param("state"), GP64())}
	s.setup()
	x, y, z := loadState(s, p)
	tag := tagVector(s)
	s.xor(tag, z)
	x, y, z = rounds(s, x, y, z)
	storeState(s, p, x, y, z)
	RET()
}

// A duplex step on one 16-byte block of input, before its permutation.
type step int

const (
	absorb  step = iota // rate ^= in
	encrypt             // out = rate ^ in; rate = out
	decrypt             // out = rate ^ in; rate = in
)

// blocks emits the sponge loop over the whole 16-byte blocks of in: each
// block is combined with the rate (the state's first 16 bytes) by st, then
// tag is XORed into the last byte and the state permuted. The state stays
// in registers from the first block to the last.
func blocks(name, doc string, s isa, st step) {
	if st == absorb {
		TEXT(name, NOSPLIT, "func(state *[48]byte, tag byte, in []byte)")
		Doc(name + " absorbs each whole 16-byte block of in into the rate of state, XORs tag into the last byte and permutes, with " + doc + ".")
	} else {
		TEXT(name, NOSPLIT, "func(state *[48]byte, tag byte, out, in []byte)")
		what := "the ciphertext"
		if st == decrypt {
			what = "the ciphertext (in)"
		}
		Doc(name + " writes each whole 16-byte block of in XOR the rate of state to out, which must be as long, puts " + what + " in the rate, XORs tag into the last byte and permutes, with " + doc + ". Each block is read before its output is written, so out may sit on in or before it.")
	}
	Pragma("noescape")
	p := Mem{Base: Load(Param("state"), GP64())}
	in := Mem{Base: Load(Param("in").Base(), GP64())}
	n := Load(Param("in").Len(), GP64())
	SHRQ(U8(4), n)
	var out Mem
	if st != absorb {
		out = Mem{Base: Load(Param("out").Base(), GP64())}
	}
	s.setup()
	x, y, z := loadState(s, p)
	tag := tagVector(s)

	Label(name + "_loop")
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	b := XMM()
	s.load(in, b)
	switch st {
	case absorb:
		s.xor(b, x)
	case encrypt:
		s.xor(b, x)
		s.store(x, out)
	case decrypt:
		s.xor(b, x)
		s.store(x, out)
		s.move(b, x)
	}
	s.xor(tag, z)
	nx, ny, nz := rounds(s, x, y, z)
	s.move(nx, x)
	s.move(ny, y)
	s.move(nz, z)
	ADDQ(U8(16), in.Base)
	if st != absorb {
		ADDQ(U8(16), out.Base)
	}
	DECQ(n)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	storeState(s, p, x, y, z)
	RET()
}

func loadState(s isa, p Mem) (x, y, z VecVirtual) {
	x, y, z = XMM(), XMM(), XMM()
	s.load(p, x)
	s.load(p.Offset(16), y)
	s.load(p.Offset(32), z)
	return x, y, z
}

func storeState(s isa, p Mem, x, y, z VecVirtual) {
	s.store(x, p)
	s.store(y, p.Offset(16))
	s.store(z, p.Offset(32))
}

// tagVector returns the tag argument in the top byte of the last word of a
// vector, ready to XOR into z. XORing it in a register rather than in
// memory avoids a byte store just before a 16-byte load of the same bytes,
// which would stall the load.
func tagVector(s isa) VecVirtual {
	r := GP64()
	Load(Param("tag"), r.As32())
	SHLL(U8(24), r.As32())
	tag := XMM()
	s.movq(r, tag)
	s.shiftBytes(12, tag)
	return tag
}

// rounds emits the 24 rounds, unrolled, and returns the new rows.
func rounds(s isa, x, y, z VecVirtual) (VecVirtual, VecVirtual, VecVirtual) {
	rc := GP64()
	for round := 24; round > 0; round-- {
		Comment(fmt.Sprintf("round %d", round))
		x, y, z = s.spbox(x, y, z)
		switch round & 3 {
		case 0:
			// Small swap: words 0<->1 and 2<->3; round constant in word 0.
			s.shuffle(0xb1, x)
			MOVL(U32(0x9e377900|uint32(round)), rc.As32())
			c := XMM()
			s.movq(rc, c)
			s.xor(c, x)
		case 2:
			// Big swap: words 0<->2 and 1<->3.
			s.shuffle(0x4e, x)
		}
	}
	return x, y, z
}
