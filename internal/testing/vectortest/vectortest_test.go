package vectortest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
	const head = `"format":"` + Format + `","format_version":1,"generator":{"reference":"netcode.c"}`
	tests := []struct {
		name, body string
		ok         bool
	}{
		{"ok", `{` + head + `,"x":"3"}`, true},
		{"other format", `{"format":"something else","format_version":1,"generator":{"reference":"netcode.c"},"x":"3"}`, false},
		{"no format", `{"format_version":1,"generator":{"reference":"netcode.c"},"x":"3"}`, false},
		{"no format_version", `{"format":"` + Format + `","generator":{"reference":"netcode.c"},"x":"3"}`, false},
		{"future format_version", `{"format":"` + Format + `","format_version":2,"generator":{"reference":"netcode.c"},"x":"3"}`, false},
		{"format_version not an integer", `{"format":"` + Format + `","format_version":"1","generator":{"reference":"netcode.c"},"x":"3"}`, false},
		{"no generator", `{"format":"` + Format + `","format_version":1,"x":"3"}`, false},
		{"null generator", `{"format":"` + Format + `","format_version":1,"generator":null,"x":"3"}`, false},
		{"generator without reference", `{"format":"` + Format + `","format_version":1,"generator":{},"x":"3"}`, false},
		{"bad body", `{` + head + `,"x":"three"}`, false},
		{"broken", `{"format":`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".json")
			require.NoError(t, os.WriteFile(p, []byte(tc.body), 0o600))
			var v struct {
				X U64 `json:"x"`
			}
			err := Load(p, &v)
			if !tc.ok {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, U64(3), v.X)
		})
	}
	var v struct{}
	assert.Error(t, Load(filepath.Join(dir, "missing.json"), &v))
}

// TestLoadCopy loads the module's copy as every package's tests do.
func TestLoadCopy(t *testing.T) {
	var v map[string]any
	require.NoError(t, Load(Path("netcode-1.02.json"), &v))
}

// vectorFiles are the shared vectors files and the one package holding
// the module's copy of each in its testdata (every package's tests read
// it through Path).
var vectorFiles = []struct {
	name   string
	copies []string
}{
	{"netcode-1.02.json", []string{"internal/testing/vectortest"}},
	{"reliable-vectors.json", []string{"internal/testing/vectortest"}},
	{"cute/README.md", []string{"internal/testing/vectortest"}},
	{"cute/primitives.json", []string{"internal/testing/vectortest"}},
	{"cute/token.json", []string{"internal/testing/vectortest"}},
	{"cute/packets.json", []string{"internal/testing/vectortest"}},
	{"cute/replay.json", []string{"internal/testing/vectortest"}},
	{"cute/transcript.json", []string{"internal/testing/vectortest"}},
	{"cute/transport/README.md", []string{"internal/testing/vectortest"}},
	{"cute/transport/ack.json", []string{"internal/testing/vectortest"}},
	{"cute/transport/transport.json", []string{"internal/testing/vectortest"}},
	{"cute/transport/transcript.json", []string{"internal/testing/vectortest"}},
}

// TestCopiesMatchShared checks that every copy of the vectors in the module
// is byte-identical to the shared original, ../shared/vectors beside the
// module (as in CI, which clones shared/ next to the repository). It skips
// when the shared tree is absent.
func TestCopiesMatchShared(t *testing.T) {
	root := moduleRoot(t)
	for _, vf := range vectorFiles {
		t.Run(vf.name, func(t *testing.T) {
			checkCopies(t, root, vf.name, vf.copies)
		})
	}
}

// inCI reports whether the tests run in the project's CI, which has what a
// plain clone lacks and must not skip for want of it.
func inCI() bool { return os.Getenv("CI") == "true" }

// checkCopies compares every testdata/name in the module with the shared
// original and requires a copy in each of the dirs listed.
func checkCopies(t *testing.T, root, name string, dirs []string) {
	shared := filepath.Join(root, "..", "shared", "vectors", name)
	want, err := os.ReadFile(shared)
	if errors.Is(err, fs.ErrNotExist) {
		copyOf := filepath.Join("internal", "testing", "vectortest", "testdata", name)
		if inCI() {
			t.Fatalf("the golden vectors' source, %s, is missing: CI (CI=true) has it beside the module, "+
				"so this check of the module's copy (%s) must run there, never skip", shared, copyOf)
		}
		t.Skipf("skipped, nothing is wrong: this check compares the module's copy of the golden vectors "+
			"(%s) with its source, %s, which a plain clone does not have; "+
			"the tests that use the copy still ran. CI (CI=true) fails here instead",
			copyOf, shared)
	}
	require.NoError(t, err)

	// Every copy, including any package not listed in dirs.
	var found []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(filepath.ToSlash(path), "/testdata/"+name) {
			pkg := strings.TrimSuffix(filepath.ToSlash(path), "/testdata/"+name)
			rel, err := filepath.Rel(root, filepath.FromSlash(pkg))
			if err != nil {
				return err
			}
			found = append(found, filepath.ToSlash(rel))
		}
		return nil
	})
	require.NoError(t, err)
	for _, dir := range dirs {
		assert.Contains(t, found, dir, "a package testing against the vectors lost its copy")
	}
	assert.ElementsMatch(t, dirs, found, "one copy of each vectors file in the module, read through Path")
	for _, dir := range found {
		t.Run(dir, func(t *testing.T) {
			got, err := os.ReadFile(filepath.Join(root, dir, "testdata", name))
			require.NoError(t, err)
			// Not assert.Equal: a diff of two large files helps nobody.
			if !bytes.Equal(want, got) {
				t.Errorf("%s/testdata/%s differs from %s: copy the shared file over it", dir, name, shared)
			}
		})
	}
}

// TestLoadCute loads every Cute Protocol vectors file and refuses one from
// another generator.
func TestLoadCute(t *testing.T) {
	for _, name := range []string{"primitives.json", "token.json", "packets.json", "replay.json", "transcript.json"} {
		var v map[string]any
		require.NoError(t, LoadCute(CutePath(name), &v), name)
	}
	dir := t.TempDir()
	for name, body := range map[string]string{
		"other_commit":  `{"generator":{"implementation":"cute_net.h","commit":"0000"}}`,
		"no_generator":  `{"x":1}`,
		"other_program": `{"generator":{"implementation":"netcode.c","commit":"` + CuteCommit + `"}}`,
		"broken":        `{"generator":`,
	} {
		p := filepath.Join(dir, name+".json")
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		var v map[string]any
		assert.Error(t, LoadCute(p, &v), name)
	}
	var v map[string]any
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ok.json"), []byte(`{"generator":{"implementation":"cute_net.h v1.03","commit":"`+CuteCommit+`"}}`), 0o600))
	assert.NoError(t, LoadCute(filepath.Join(dir, "ok.json"), &v))
}

// TestPath checks that Path names the files in this package's testdata.
func TestPath(t *testing.T) {
	_, err := os.Stat(Path("reliable-vectors.json"))
	require.NoError(t, err)
	assert.True(t, filepath.IsAbs(Path("x")))
}

// moduleRoot returns the directory holding the module's go.mod, found by
// walking up from the package directory the test runs in.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// fatalRecorder is a testing.TB whose Fatalf records instead of stopping.
type fatalRecorder struct {
	testing.TB
	fatal string
}

func (r *fatalRecorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }

// TestOnce: Once decodes a file once per type and shares the result, and
// fails the test, naming the file, when it cannot be loaded.
func TestOnce(t *testing.T) {
	type head struct {
		Format string `json:"format"`
	}
	a := Once[head](t, "netcode-1.02.json", Load)
	b := Once[head](t, "netcode-1.02.json", Load)
	if a != b || a.Format != Format {
		t.Fatalf("Once gave %p %+v and %p, want one shared decoding of format %q", a, a, b, Format)
	}
	type other struct {
		Format string `json:"format"`
	}
	if c := Once[other](t, "netcode-1.02.json", Load); c.Format != Format {
		t.Fatalf("another type: format %q", c.Format)
	}
	r := &fatalRecorder{TB: t}
	Once[head](r, "no-such-file.json", Decode)
	if !strings.Contains(r.fatal, "no-such-file.json") {
		t.Fatalf("a missing file: Fatalf got %q", r.fatal)
	}
}
