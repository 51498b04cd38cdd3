package bench

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the test binary as a child process of the bridge load mode
// when the bridge tests start it that way (as "netcode bench" does with
// ChildArg), and otherwise runs the tests and checks that none leaves a
// goroutine behind.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ChildArg {
		if err := RunChild(context.Background(), os.Args[2:], os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// testChild is the command line that runs this test binary as a child.
func testChild(t *testing.T) []string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe, ChildArg}
}
