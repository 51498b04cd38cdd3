// Command netcode is the netcode tool: it makes keys and connect tokens,
// runs an echo server, and measures the library under load.
//
// Usage:
//
//	netcode keygen [-base64] [-o file]
//	netcode token -key KEY -server host:port [-server ...] [-client-id N] [-o file] [-base64]
//	netcode inspect TOKEN-FILE
//	netcode serve -key KEY [-addr :40000] [-max-clients 256] [-v]
//	netcode bridge -allow host:port [-allow ...] [-addr 127.0.0.1:8080] [-v]
//	netcode bench [-clients 64] [-size 64] [-rate 0] [-duration 10s] [-baseline]
//
// Run "netcode <command> -h" for a command's flags. A KEY is 32 bytes in hex
// or base64, given directly or as the name of a file holding it (as written
// by keygen). Every command's protocol id defaults to 0x6e6574636f646531
// ("netcode1"); -protocol changes it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command is one subcommand: it parses args and runs, writing its output to
// stdout and diagnostics to stderr.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = []command{
	{"keygen", "print a random 32-byte private key", runKeygen},
	{"token", "mint a connect token", runToken},
	{"inspect", "print the public part of a connect token", runInspect},
	{"serve", "run an echo server", runServe},
	{"bridge", "relay browser WebSocket sessions to netcode servers", runBridge},
	{"bench", "measure throughput, latency, CPU and allocations on loopback", runBench},
	{"version", "print the release, module version and VCS revision of this build", runVersion},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: netcode <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun \"netcode <command> -h\" for a command's flags.")
}

// run runs the command line args and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		}
		fmt.Fprintf(stderr, "netcode %s: %v\n", c.name, err)
		return 1
	}
	fmt.Fprintf(stderr, "netcode: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

// errUsage reports a command line the flag package already complained about.
var errUsage = errors.New("usage")

// newFlags returns a flag set for a command, writing its usage to stderr.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("netcode "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: netcode %s %s\n\nflags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args with fs and rejects positional arguments.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	return nil
}
