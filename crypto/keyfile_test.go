package crypto_test

import (
	"encoding/base64"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/crypto"
)

func TestParseKey(t *testing.T) {
	var key crypto.Key
	for i := range key {
		key[i] = byte(i*7 + 1)
	}
	tests := []struct {
		name string
		in   []byte
		ok   bool
	}{
		{"hex", []byte(hex.EncodeToString(key[:])), true},
		{"hex newline", []byte(hex.EncodeToString(key[:]) + "\n"), true},
		{"hex upper", []byte(strings.ToUpper(hex.EncodeToString(key[:]))), true},
		{"base64", []byte(base64.StdEncoding.EncodeToString(key[:]) + "\r\n"), true},
		{"base64 url raw", []byte(base64.RawURLEncoding.EncodeToString(key[:])), true},
		{"raw", key[:], true},
		{"empty", nil, false},
		{"short hex", []byte(hex.EncodeToString(key[:31])), false},
		{"long hex", []byte(hex.EncodeToString(append(key[:], 1))), false},
		{"text", []byte("hello"), false},
		{"zero hex", []byte(strings.Repeat("0", 64)), false},
		{"zero raw", make([]byte, 32), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := crypto.ParseKey(tc.in)
			if !tc.ok {
				assert.ErrorIs(t, err, crypto.ErrNotAKey)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, key, got)
		})
	}
}

func TestReadKeyFile(t *testing.T) {
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	dir := t.TempDir()
	write := func(name string, b []byte, perm os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, perm))
		require.NoError(t, os.Chmod(p, perm)) // whatever the umask
		return p
	}
	unix := runtime.GOOS != "windows"
	tests := []struct {
		name    string
		path    string
		exposed bool
		err     error // nil: the key is read
		errText string
	}{
		{"hex 0600", write("hex", []byte(hex.EncodeToString(key[:])+"\n"), 0o600), false, nil, ""},
		{"base64 0400", write("b64", []byte(base64.StdEncoding.EncodeToString(key[:])+"\n"), 0o400), false, nil, ""},
		{"raw 0600", write("raw", key[:], 0o600), false, nil, ""},
		{"group readable", write("g", key[:], 0o640), unix, nil, ""},
		{"world readable", write("w", key[:], 0o644), unix, nil, ""},
		{"missing", filepath.Join(dir, "nothing"), false, fs.ErrNotExist, "nothing"},
		{"not a key", write("bad", []byte("hello\n"), 0o600), false, crypto.ErrNotAKey, "bad"},
		{"too big", write("big", make([]byte, 4097), 0o600), false, nil, "larger than"},
		{"directory", dir, false, nil, "not a regular file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, exposed, err := crypto.ReadKeyFile(tc.path)
			if tc.err != nil || tc.errText != "" {
				require.Error(t, err)
				if tc.err != nil {
					assert.ErrorIs(t, err, tc.err)
				}
				assert.Contains(t, err.Error(), tc.errText)
				assert.Equal(t, crypto.Key{}, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, key, got)
			assert.Equal(t, tc.exposed, exposed)
		})
	}
}

func FuzzParseKey(f *testing.F) {
	f.Add([]byte("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"))
	f.Add(make([]byte, 32))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := crypto.ParseKey(b)
		if err == nil && k == (crypto.Key{}) {
			t.Fatal("zero key accepted")
		}
	})
}
