package browsertest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestChromiumPath checks where the browser is looked for: a file named by
// NETCODE_CHROMIUM (only if it exists), else the names on $PATH.
func TestChromiumPath(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "chromium")
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\nexit 1\n"), 0o755))
	empty := t.TempDir()
	tests := []struct {
		name, path, env, want string
	}{
		{"on PATH", dir, "", fake},
		{"not on PATH", empty, "", ""},
		{"NETCODE_CHROMIUM names a file", empty, fake, fake},
		{"NETCODE_CHROMIUM names nothing", dir, filepath.Join(empty, "nothing"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("PATH", tt.path)
			t.Setenv("NETCODE_CHROMIUM", tt.env)
			assert.Equal(t, tt.want, ChromiumPath())
		})
	}
}

// TestNeedSkipsWithoutBrowser checks that without a browser Need skips a
// test (or fails it with NETCODE_BROWSER_TEST=1), saying why, and leaves
// the working directory where it was.
func TestNeedSkipsWithoutBrowser(t *testing.T) {
	wd, err := os.Getwd()
	require.NoError(t, err)
	for _, required := range []string{"", "1"} {
		t.Run("NETCODE_BROWSER_TEST="+required, func(t *testing.T) {
			t.Setenv("PATH", t.TempDir()+string(os.PathListSeparator)+"/nonexistent")
			t.Setenv("NETCODE_CHROMIUM", "")
			t.Setenv("NETCODE_BROWSER_TEST", required)
			rec := &recorder{TB: t}
			done := make(chan struct{})
			go func() { // Skip and Fatal end the goroutine, as in a test
				defer close(done)
				Need(rec)
			}()
			<-done
			if required == "1" {
				assert.True(t, rec.failed, "a missing browser must fail the test")
				assert.False(t, rec.skipped)
			} else {
				assert.True(t, rec.skipped, "a missing browser must skip the test")
				assert.False(t, rec.failed)
			}
			assert.Contains(t, rec.msg, SkipMessage+" on $PATH")
			now, err := os.Getwd()
			require.NoError(t, err)
			assert.Equal(t, wd, now)
		})
	}
}

// recorder is a testing.TB that records a skip or a failure instead of
// acting on the real test.
type recorder struct {
	testing.TB
	msg             string
	skipped, failed bool
}

func (r *recorder) Helper() {}

func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = true
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = true
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
