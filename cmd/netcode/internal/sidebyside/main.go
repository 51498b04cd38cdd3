package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

const usage = `usage: sidebyside datagrams [flags]   quic-go DATAGRAM vs netcode vs plain UDP echoes
       sidebyside streams [flags]     reliable.Stream vs quic-go stream vs TCP
       sidebyside cref [flags]        the C reference (NETCODE_C_SRC=dir) vs netcode bench (-api: and the public-API harness)
       sidebyside cute [flags]        Cute Framework's cute_net.h (CUTE_NET_SRC=dir) vs package cute
       sidebyside tables -before REV  the README's performance tables, two revisions interleaved (about 10 minutes)
Run "sidebyside COMMAND -h" for a command's flags.`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "sidebyside:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return flag.ErrHelp
	}
	switch args[0] {
	case "datagrams":
		return runDatagrams(ctx, args[1:], stdout, stderr)
	case "streams":
		return runStreams(ctx, args[1:], stdout, stderr)
	case "cref":
		return runCref(ctx, args[1:], stdout, stderr)
	case childArg:
		return runChild(args[1:])
	case pingpongArg:
		return runPingpong(args[1:], stdout, stderr)
	case apiechoArg:
		return runAPIEcho(args[1:], stdout, stderr)
	case cuteechoArg:
		return runCuteEcho(args[1:], stdout, stderr)
	case "cute":
		return runCute(ctx, args[1:], stdout, stderr)
	case "tables":
		return runTables(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintln(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// newFlags returns a flag set for command name that reports to stderr.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("sidebyside "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// procsFlag adds -gomaxprocs to a hidden command's flags: its harness runs
// with runtime.GOMAXPROCS(N), 0 leaving the runtime's default (cref
// -api-floor and cute -floor run each Go side again with 1, so that
// readying a goroutine wakes no idle thread to look for work).
func procsFlag(fs *flag.FlagSet) *int {
	return fs.Int("gomaxprocs", 0, "run with runtime.GOMAXPROCS(N) (0: the runtime's default)")
}

// setProcs applies -gomaxprocs n (0: nothing) and returns what restores
// the setting before (the tests run the hidden commands in their process).
func setProcs(n int) (restore func(), err error) {
	if n < 0 {
		return nil, errors.New("-gomaxprocs 0 or more")
	}
	if n == 0 {
		return func() {}, nil
	}
	old := runtime.GOMAXPROCS(n)
	return func() { runtime.GOMAXPROCS(old) }, nil
}

// intList parses a comma-separated list of positive integers.
func intList(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a list of positive integers", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// nameList parses a comma-separated list of names, each one of known.
func nameList(s string, known ...string) ([]string, error) {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(known, f) {
			return nil, fmt.Errorf("unknown %q: want some of %s", f, strings.Join(known, ","))
		}
		out = append(out, f)
	}
	return out, nil
}

// rotated returns list rotated left by k, so that each round of an
// interleaved comparison starts with another transport.
func rotated[T any](list []T, k int) []T {
	if len(list) == 0 {
		return nil
	}
	k %= len(list)
	return append(append([]T(nil), list[k:]...), list[:k]...)
}

// uptime returns the output of uptime(1), the machine's load average, or
// why it has none.
func uptime() string {
	out, err := exec.Command("uptime").Output()
	if err != nil {
		return "(uptime: " + err.Error() + ")"
	}
	return strings.TrimSpace(string(out))
}

// output runs the program name with args and returns its standard
// output; its error says the command and what it wrote to stderr.
func output(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out, nil
}

// sleepCtx waits for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
