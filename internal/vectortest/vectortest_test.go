package vectortest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTypes(t *testing.T) {
	var v struct {
		A, B, C Hex
		N, M    U64
	}
	require.NoError(t, json.Unmarshal([]byte(`{"A":"00ff","B":null,"C":"","N":"18446744073709551615","M":7}`), &v))
	assert.Equal(t, Hex{0, 0xff}, v.A)
	assert.Nil(t, v.B)
	assert.Empty(t, v.C)
	assert.Equal(t, U64(1<<64-1), v.N)
	assert.Equal(t, U64(7), v.M)
	for _, bad := range []string{`{"A":"0g"}`, `{"A":5}`, `{"N":"-1"}`, `{"N":"18446744073709551616"}`} {
		assert.Error(t, json.Unmarshal([]byte(bad), &v), bad)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	var v struct {
		X U64 `json:"x"`
	}
	require.NoError(t, Load(write("ok.json", `{"format":"`+Format+`","x":"3"}`), &v))
	assert.Equal(t, U64(3), v.X)
	assert.Error(t, Load(write("other.json", `{"format":"something else","x":"3"}`), &v))
	assert.Error(t, Load(write("broken.json", `{"format":`), &v))
	assert.Error(t, Load(filepath.Join(dir, "missing.json"), &v))
}
