// Package browsertest starts headless Chromium for end-to-end tests, with
// one rule for every such test: a missing browser fails the test when the
// project's variable NETCODE_BROWSER_TEST is 1 (.ci/run sets it), and skips
// it otherwise. The generic CI variable does not count: every CI system
// sets it, so "go test ./..." in a container without Chromium would fail.
//
// A test calls Need (or Start) before it starts anything else, so that a
// skip leaves no goroutine or server behind for goleak to find.
//
// Whether a test skips depends on the environment and on files outside
// the module, which go test's cache knows only through what the test
// binary asks the os package for. It records each os.Getenv, os.Stat,
// os.Open and os.Chdir, and reuses a result only while they would answer
// the same; but it rechecks a stat or an open only inside the module (or
// GOPATH or GOROOT), so a stat of /usr/bin/chromium alone would leave a
// skip cached after Chromium is installed. A chdir it rechecks wherever
// it leads, by the directory's own stat, whose modification time changes
// whenever an entry is added to or removed from it. So Need reads the
// variables with os.Getenv and steps into each directory the browser is
// looked up in (every $PATH entry, and that of $NETCODE_CHROMIUM) and
// back: installing or removing a browser there ends the cached result.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// ChromiumPath finds the browser: $NETCODE_CHROMIUM if it names a file,
// or Debian's chromium (installed by .ci/browser-deps.sh) or another
// Chrome on $PATH; "" if none.
func ChromiumPath() string {
	if p := os.Getenv("NETCODE_CHROMIUM"); p != "" {
		// Stat it, so that the test cache notices when it appears.
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
		return ""
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Required reports whether a missing browser is a failure rather than a
// reason to skip: NETCODE_BROWSER_TEST=1.
func Required() bool {
	return os.Getenv("NETCODE_BROWSER_TEST") == "1"
}

// SkipMessage begins the message of a test skipped for want of a browser;
// .ci/run looks for it.
const SkipMessage = "chromium not found"

// Need returns the browser's path, or fails or skips t without one, as the
// package documentation says. Call it first thing in a browser test: a
// test that has started a server or an App before it skips leaves their
// goroutines behind.
func Need(t testing.TB) string {
	t.Helper()
	dependOnLookupDirs(t)
	path := ChromiumPath()
	if path == "" {
		where := "on $PATH"
		if p := os.Getenv("NETCODE_CHROMIUM"); p != "" {
			where = "at $NETCODE_CHROMIUM (" + p + ")"
		}
		if Required() {
			t.Fatalf("%s %s and NETCODE_BROWSER_TEST=1: run .ci/browser-deps.sh (apt-get install chromium) or set NETCODE_CHROMIUM", SkipMessage, where)
		}
		t.Skipf("%s %s, so the browser test cannot run: install it (.ci/browser-deps.sh) or set NETCODE_CHROMIUM; NETCODE_BROWSER_TEST=1 makes this a failure", SkipMessage, where)
	}
	return path
}

// dependOnLookupDirs makes go test's cache depend on the directories
// ChromiumPath looks in (see the package documentation): it changes into
// each and back, which the test log records.
func dependOnLookupDirs(t testing.TB) {
	t.Helper()
	dirs := filepath.SplitList(os.Getenv("PATH"))
	if p := os.Getenv("NETCODE_CHROMIUM"); p != "" {
		dirs = append(dirs, filepath.Dir(p))
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	for _, d := range dirs {
		if d == "" || !filepath.IsAbs(d) {
			continue // a relative entry names a directory relative to wd, already recorded
		}
		if os.Chdir(d) != nil {
			continue // absent: nothing to look up there
		}
		if err := os.Chdir(wd); err != nil {
			t.Fatalf("browsertest: back to %s: %v", wd, err)
		}
	}
}

// Start launches headless Chromium and returns a chromedp context with one
// tab; cancel stops the browser. Without a browser it fails or skips t as
// Need does.
func Start(t *testing.T) (ctx context.Context, cancel context.CancelFunc) {
	t.Helper()
	path := Need(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1000, 800),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx, chromedp.WithErrorf(t.Logf))
	cancel = func() {
		cancelCtx()
		cancelAlloc()
	}
	// Start the browser now, without a deadline (a deadline on the first
	// Run would bound the browser's life).
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx, cancel
}
