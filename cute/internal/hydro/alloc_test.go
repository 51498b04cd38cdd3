package hydro

import (
	"github.com/gonetcode/netcode/internal/testing/race"
	"strconv"
	"testing"
)

// TestSealOpenAlloc checks that sealing and opening a packet allocates
// nothing, with a drawn IV as in production.
func TestSealOpenAlloc(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector changes what escapes to the heap (a stack IV passed to crypto/rand does); .ci/run runs this test without -race")
	}
	var key [KeyBytes]byte
	msg := make([]byte, 1207)
	box := make([]byte, len(msg)+HeaderBytes)
	out := make([]byte, len(msg))
	id := uint64(0)
	allocs := testing.AllocsPerRun(100, func() {
		id++
		Seal(box, msg, id, &testCtx, &key)
		if Open(out, box, id, &testCtx, &key) != nil {
			t.Fatal("open failed")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per seal and open, want 0", allocs)
	}
	var bk BoxKey
	bk.Set(&key, &testCtx)
	var iv [IVBytes]byte
	allocs = testing.AllocsPerRun(100, func() {
		id++
		bk.SealIV(box, msg, id, &iv)
		if bk.Open(out, box, id) != nil {
			t.Fatal("open failed")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per seal and open with a BoxKey, want 0", allocs)
	}
}

func BenchmarkSeal(b *testing.B) {
	for _, n := range []int{0, 100, 1207} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			var key [KeyBytes]byte
			msg := make([]byte, n)
			box := make([]byte, n+HeaderBytes)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			defer reportCPU(b)()
			for i := 0; b.Loop(); i++ {
				Seal(box, msg, uint64(i), &testCtx, &key)
			}
		})
	}
}

// BenchmarkBoxKey is BenchmarkSeal and BenchmarkOpen with the key's
// states computed once, as a connection's packet keys are.
func BenchmarkBoxKey(b *testing.B) {
	for _, n := range []int{0, 100, 1207} {
		var bk BoxKey
		bk.Set(&[KeyBytes]byte{}, &testCtx)
		msg := make([]byte, n)
		box := make([]byte, n+HeaderBytes)
		var iv [IVBytes]byte
		b.Run("seal/"+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			defer reportCPU(b)()
			for i := 0; b.Loop(); i++ {
				bk.SealIV(box, msg, uint64(i), &iv)
			}
		})
		bk.SealIV(box, msg, 1, &iv)
		b.Run("open/"+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				if bk.Open(msg, box, 1) != nil {
					b.Fatal("open failed")
				}
			}
		})
	}
}

func BenchmarkOpen(b *testing.B) {
	for _, n := range []int{0, 100, 1207} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			var key [KeyBytes]byte
			msg := make([]byte, n)
			box := make([]byte, n+HeaderBytes)
			Seal(box, msg, 1, &testCtx, &key)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				if Open(msg, box, 1, &testCtx, &key) != nil {
					b.Fatal("open failed")
				}
			}
		})
	}
}

func BenchmarkSign(b *testing.B) {
	var sk [SecretKeyBytes]byte
	var pk [PublicKeyBytes]byte
	GenerateKeyPair(&sk, &pk)
	msg := make([]byte, 960)
	var sig [SignatureBytes]byte
	b.ReportAllocs()
	for b.Loop() {
		Sign(&sig, msg, &testCtx, &sk)
	}
}

func BenchmarkVerify(b *testing.B) {
	var sk [SecretKeyBytes]byte
	var pk [PublicKeyBytes]byte
	GenerateKeyPair(&sk, &pk)
	msg := make([]byte, 960)
	var sig [SignatureBytes]byte
	Sign(&sig, msg, &testCtx, &sk)
	b.ReportAllocs()
	for b.Loop() {
		if Verify(&sig, msg, &testCtx, &pk) != nil {
			b.Fatal("verify failed")
		}
	}
}

// BenchmarkGimli measures Gimli as the package calls it (the widest
// assembly this processor runs), then each permutation on its own.
func BenchmarkGimli(b *testing.B) {
	var st [GimliBytes]byte
	b.Run("Gimli", func(b *testing.B) {
		defer reportCPU(b)()
		for b.Loop() {
			Gimli(&st, 0)
		}
	})
	impls := append(implementations(), generic)
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			if !im.available {
				b.Skipf("this processor lacks %s", im.name)
			}
			defer reportCPU(b)()
			for b.Loop() {
				im.permute(&st, 0)
			}
		})
	}
}
