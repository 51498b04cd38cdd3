// Package browsertest starts headless Chromium for end-to-end tests, with
// one rule for every such test: a missing browser fails the test when the
// project's variable NETCODE_BROWSER_TEST is 1 (.ci/run sets it), and skips
// it otherwise. The generic CI variable does not count: every CI system
// sets it, so "go test ./..." in a container without Chromium would fail.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/chromedp/chromedp"
)

// ChromiumPath finds the browser: $NETCODE_CHROMIUM, or Debian's chromium
// (installed by .ci/browser-deps.sh) or another Chrome on $PATH; "" if none.
func ChromiumPath() string {
	if p := os.Getenv("NETCODE_CHROMIUM"); p != "" {
		return p
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

// Start launches headless Chromium and returns a chromedp context with one
// tab; cancel stops the browser. Without a browser it fails or skips t as
// the package documentation says.
func Start(t *testing.T) (ctx context.Context, cancel context.CancelFunc) {
	t.Helper()
	path := ChromiumPath()
	if path == "" {
		if Required() {
			t.Fatal("chromium not found and NETCODE_BROWSER_TEST=1: run .ci/browser-deps.sh (apt-get install chromium) or set NETCODE_CHROMIUM")
		}
		t.Skip("chromium not found, so the browser test cannot run: install it (.ci/browser-deps.sh) or set NETCODE_CHROMIUM; NETCODE_BROWSER_TEST=1 makes this a failure")
	}
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
