package hydro

import (
	"bytes"
	"testing"

	"github.com/gonetcode/netcode/internal/testing/vectortest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type hx = vectortest.Hex

// primitives mirrors primitives.json.
type primitives struct {
	Gimli struct {
		Cases []struct {
			Name          string
			Input, Output hx
			Tag           byte
			Iterations    int
		}
	}
	HydroHash struct {
		Cases []struct {
			CtxHex hx `json:"ctx_hex"`
			Key    hx
			Msg    hx
			OutLen int `json:"out_len"`
			RC     int
			Out    hx
		}
		ErrorCases []struct {
			OutLen int `json:"out_len"`
			RC     int
		} `json:"error_cases"`
	} `json:"hydro_hash"`
	RandomDeterministic struct {
		Cases []struct {
			Seed hx
			Len  int
			Out  hx
		}
	} `json:"hydro_random_buf_deterministic"`
	Secretbox struct {
		EncryptIV []struct {
			Key, IV, Msg, Out hx
			Ctx               string
			MsgID             uint64 `json:"msg_id"`
			Decrypts          bool
		} `json:"encrypt_iv_cases"`
		Seeded []struct {
			Key, Msg, Out hx
			IVDrawn       hx `json:"iv_drawn"`
			Ctx           string
			MsgID         uint64 `json:"msg_id"`
		} `json:"encrypt_with_seeded_rng"`
		Rejections []struct {
			What            string
			Key, Ciphertext hx
			Plaintext       hx
			Ctx             string
			MsgID           uint64 `json:"msg_id"`
			Accepted        bool
		} `json:"decrypt_rejections"`
	} `json:"hydro_secretbox"`
	SecretboxNormal []struct {
		Key, Ciphertext, Plaintext hx
		Ctx                        string
		MsgID                      uint64 `json:"msg_id"`
		RC                         int    `json:"decrypt_rc"`
	} `json:"secretbox_decrypt_only_normal_build"`
	Sign struct {
		KeyPairs   []struct{ Seed, PK, SK hx } `json:"keypairs"`
		Signatures []struct {
			Message, PK, SK, Signature hx
			Ctx                        string
			RandomR                    hx `json:"random_r"`
			Prehash                    hx
			EphScalar                  hx  `json:"eph_scalar"`
			VerifyRC                   int `json:"verify_rc"`
		}
		VerifyRejections []struct {
			What                   string
			Message, PK, Signature hx
			Ctx                    string
			Accepted               bool
		} `json:"verify_rejections"`
	} `json:"hydro_sign"`
	SignNormal []struct {
		PK, Message, Signature hx
		Ctx                    string
		RC                     int `json:"verify_rc"`
	} `json:"sign_verify_only_normal_build"`
}

func loadPrimitives(t testing.TB) *primitives {
	t.Helper()
	var p primitives
	require.NoError(t, vectortest.LoadCute(vectortest.CutePath("primitives.json"), &p))
	return &p
}

func ctxOf(t testing.TB, s string) *[ContextBytes]byte {
	t.Helper()
	require.Len(t, s, ContextBytes)
	var c [ContextBytes]byte
	copy(c[:], s)
	return &c
}

func TestGimliVectors(t *testing.T) {
	p := loadPrimitives(t)
	require.NotEmpty(t, p.Gimli.Cases)
	for _, c := range p.Gimli.Cases {
		var st [GimliBytes]byte
		require.Len(t, c.Input, GimliBytes)
		copy(st[:], c.Input)
		for range max(c.Iterations, 1) {
			Gimli(&st, c.Tag)
		}
		assert.Equal(t, []byte(c.Output), st[:], c.Name)
	}
	t.Logf("gimli %d/%d", len(p.Gimli.Cases), len(p.Gimli.Cases))
}

func TestHashVectors(t *testing.T) {
	p := loadPrimitives(t)
	require.Len(t, p.HydroHash.Cases, 122)
	for i, c := range p.HydroHash.Cases {
		var ctx [ContextBytes]byte
		copy(ctx[:], c.CtxHex)
		var key *[HashKeyBytes]byte
		if c.Key != nil {
			key = (*[HashKeyBytes]byte)(c.Key)
		}
		out := make([]byte, c.OutLen)
		require.NoError(t, HashSum(out, c.Msg, &ctx, key), i)
		assert.Equal(t, []byte(c.Out), out, "case %d", i)

		// The streaming interface in uneven pieces gives the same bytes.
		h := NewHash(&ctx, key)
		for m := []byte(c.Msg); len(m) > 0; {
			n := min(len(m), 1+i%23)
			h.Write(m[:n])
			m = m[n:]
		}
		out2 := make([]byte, c.OutLen)
		require.NoError(t, h.Sum(out2))
		assert.Equal(t, out, out2)
	}
	for _, c := range p.HydroHash.ErrorCases {
		out := make([]byte, c.OutLen)
		assert.ErrorIs(t, HashSum(out, nil, &zeroContext, nil), ErrHashLength, c.OutLen)
	}
}

func TestRandomDeterministicVectors(t *testing.T) {
	p := loadPrimitives(t)
	require.Len(t, p.RandomDeterministic.Cases, 18)
	for _, c := range p.RandomDeterministic.Cases {
		out := make([]byte, c.Len)
		RandomBufDeterministic(out, (*[SeedBytes]byte)(c.Seed))
		assert.Equal(t, []byte(c.Out), out)
	}
}

func TestSecretboxVectors(t *testing.T) {
	p := loadPrimitives(t)
	sb := p.Secretbox
	require.Len(t, sb.EncryptIV, 23)
	for i, c := range sb.EncryptIV {
		ctx := ctxOf(t, c.Ctx)
		key := (*[KeyBytes]byte)(c.Key)
		box := make([]byte, len(c.Msg)+HeaderBytes)
		SealIV(box, c.Msg, c.MsgID, ctx, key, (*[IVBytes]byte)(c.IV))
		assert.Equal(t, []byte(c.Out), box, "case %d", i)
		msg := make([]byte, len(c.Msg))
		assert.Equal(t, c.Decrypts, Open(msg, box, c.MsgID, ctx, key) == nil)
		assert.Equal(t, []byte(c.Msg), msg)

		// Sealing in place (ciphertext over the message) and opening in
		// place 36 bytes back, as the packets do.
		buf := make([]byte, len(c.Msg)+HeaderBytes)
		copy(buf[HeaderBytes:], c.Msg)
		SealIV(buf, buf[HeaderBytes:], c.MsgID, ctx, key, (*[IVBytes]byte)(c.IV))
		assert.Equal(t, []byte(c.Out), buf)
		require.NoError(t, Open(buf[:len(c.Msg)], buf, c.MsgID, ctx, key))
		assert.Equal(t, []byte(c.Msg), buf[:len(c.Msg)])

		// The same with the key's states computed once (BoxKey), twice
		// over: a BoxKey is not changed by its seals and opens.
		var bk BoxKey
		bk.Set(key, ctx)
		for range 2 {
			clear(box)
			bk.SealIV(box, c.Msg, c.MsgID, (*[IVBytes]byte)(c.IV))
			assert.Equal(t, []byte(c.Out), box, "case %d, BoxKey", i)
			clear(msg)
			assert.Equal(t, c.Decrypts, bk.Open(msg, box, c.MsgID) == nil)
			assert.Equal(t, []byte(c.Msg), msg)
		}
	}
	require.Len(t, sb.Seeded, 3)
	for _, c := range sb.Seeded {
		box := make([]byte, len(c.Msg)+HeaderBytes)
		SealIV(box, c.Msg, c.MsgID, ctxOf(t, c.Ctx), (*[KeyBytes]byte)(c.Key), (*[IVBytes]byte)(c.IVDrawn))
		assert.Equal(t, []byte(c.Out), box)
	}
	require.Len(t, sb.Rejections, 12)
	for _, c := range sb.Rejections {
		n := max(len(c.Ciphertext)-HeaderBytes, 0)
		msg := bytes.Repeat([]byte{0xaa}, n)
		err := Open(msg, c.Ciphertext, c.MsgID, ctxOf(t, c.Ctx), (*[KeyBytes]byte)(c.Key))
		assert.Equal(t, c.Accepted, err == nil, c.What)
		var bk BoxKey
		bk.Set((*[KeyBytes]byte)(c.Key), ctxOf(t, c.Ctx))
		again := bytes.Repeat([]byte{0xaa}, n)
		assert.Equal(t, err == nil, bk.Open(again, c.Ciphertext, c.MsgID) == nil, "%s, BoxKey", c.What)
		assert.Equal(t, msg, again, "%s, BoxKey", c.What)
		if c.Accepted {
			assert.Equal(t, []byte(c.Plaintext), msg, c.What)
		} else {
			assert.ErrorIs(t, err, ErrOpen)
			assert.Equal(t, make([]byte, n), msg, "%s: a failed open leaves zeros", c.What)
		}
	}
	require.Len(t, p.SecretboxNormal, 7)
	for _, c := range p.SecretboxNormal {
		msg := make([]byte, len(c.Ciphertext)-HeaderBytes)
		require.NoError(t, Open(msg, c.Ciphertext, c.MsgID, ctxOf(t, c.Ctx), (*[KeyBytes]byte)(c.Key)))
		assert.Equal(t, []byte(c.Plaintext), msg)
	}
}

func TestSignVectors(t *testing.T) {
	p := loadPrimitives(t)
	s := p.Sign
	require.Len(t, s.KeyPairs, 4)
	for _, kp := range s.KeyPairs {
		var sk [SecretKeyBytes]byte
		var pk [PublicKeyBytes]byte
		KeyPairDeterministic(&sk, &pk, (*[SeedBytes]byte)(kp.Seed))
		assert.Equal(t, []byte(kp.SK), sk[:])
		assert.Equal(t, []byte(kp.PK), pk[:])
	}
	require.Len(t, s.Signatures, 8)
	for i, c := range s.Signatures {
		ctx := ctxOf(t, c.Ctx)
		var prehash [prehashBytes]byte
		Prehash(&prehash, c.Message, ctx)
		assert.Equal(t, []byte(c.Prehash), prehash[:])
		var sig [SignatureBytes]byte
		SignWith(&sig, c.Message, ctx, (*[SecretKeyBytes]byte)(c.SK), (*[SignRandBytes]byte)(c.RandomR))
		assert.Equal(t, []byte(c.Signature), sig[:], "signature %d", i)
		assert.NoError(t, Verify(&sig, c.Message, ctx, (*[PublicKeyBytes]byte)(c.PK)))
	}
	require.Len(t, s.VerifyRejections, 7)
	for _, c := range s.VerifyRejections {
		err := Verify((*[SignatureBytes]byte)(c.Signature), c.Message, ctxOf(t, c.Ctx), (*[PublicKeyBytes]byte)(c.PK))
		assert.Equal(t, c.Accepted, err == nil, c.What)
	}
	require.Len(t, p.SignNormal, 4)
	for _, c := range p.SignNormal {
		assert.NoError(t, Verify((*[SignatureBytes]byte)(c.Signature), c.Message, ctxOf(t, c.Ctx), (*[PublicKeyBytes]byte)(c.PK)))
	}
}

// TestSealDrawsIV: sealing the same message twice under the same key and
// message id gives different boxes (a fresh IV from crypto/rand each
// time), and both open.
func TestSealDrawsIV(t *testing.T) {
	var key [KeyBytes]byte
	msg := []byte("same message, same id")
	a := make([]byte, len(msg)+HeaderBytes)
	b := make([]byte, len(msg)+HeaderBytes)
	Seal(a, msg, 0, &testCtx, &key)
	Seal(b, msg, 0, &testCtx, &key)
	assert.NotEqual(t, a, b)
	out := make([]byte, len(msg))
	require.NoError(t, Open(out, a, 0, &testCtx, &key))
	require.NoError(t, Open(out, b, 0, &testCtx, &key))
	assert.Equal(t, msg, out)
}
