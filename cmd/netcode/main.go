// Command netcode is the netcode tool: it makes keys and connect tokens,
// runs an echo or chat server, connects as a client, relays browsers, and
// measures the library under load.
//
// Usage:
//
//	netcode keygen [-base64] [-o file]
//	netcode token -key KEY -server host:port [-server ...] [-client-id N] [-o file] [-base64]
//	netcode inspect TOKEN-FILE|-
//	netcode serve -key KEY [-addr :40000] [-max-clients 256] [-chat] [-metrics ADDR] [-drain 25s] [-v]
//	              [-registry redis://HOST:PORT -region R -tags T,U]
//	netcode fleet -registry redis://HOST:PORT [-region R]
//	netcode client [-auth BEARER] [-ca FILE] [-echo N -size B -rate R] TOKEN-FILE|-|URL
//	netcode bridge -allow host:port [-allow ...] [-addr 127.0.0.1:8080] [-webtransport host:port] [-tls-cert FILE -tls-key FILE] [-v]
//	netcode bridge -mode transport -key KEY [-udp :40000] [-addr 127.0.0.1:8080] [-webtransport host:port] [-tls-cert FILE -tls-key FILE]
//	netcode wire -allow IP:port[-port] [-allow ...] [-addr :443] [-tls-cert FILE -tls-key FILE | -acme-domain NAME] [-metrics ADDR]
//	netcode bench [-clients 64] [-size 64] [-rate 0] [-duration 10s] [-baseline]
//	netcode version
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
	"regexp"
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
	{"serve", "run an echo (or -chat) server", runServe},
	{"client", "connect with a token: a line client, or a scripted echo client", runClient},
	{"bridge", "bridge browsers to netcode over WebSocket and WebTransport (relay or transport)", runBridge},
	{"wire", "serve the datagram wire of browser game clients (Cute Framework web builds, netcode), 1:1 to UDP servers", runWire},
	{"fleet", "list the game servers registered in a fleet registry (Redis)", runFleet},
	{"bench", "measure throughput, latency, CPU and allocations on loopback", runBench},
	{"cute", "the Cute Protocol dialect: keygen, token, inspect, serve, client", runCute},
	{"version", "print the release, module version and VCS revision of this build", runVersion},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first signal asks the command to finish; from then on the
		// default handling is back, so a second one ends the process at once.
		<-ctx.Done()
		stop()
	}()
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
		case ctx.Err() != nil && errors.Is(err, context.Canceled):
			// A signal cut the command short.
			fmt.Fprintf(stderr, "netcode %s: interrupted\n", c.name)
			return 1
		}
		fmt.Fprintf(stderr, "netcode %s: %s\n", c.name, plainError(err))
		return 1
	}
	fmt.Fprintf(stderr, "netcode: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

// libraryPrefix matches the prefixes the library's packages give their
// errors ("netcode/crypto: ", "netcode/token: "): the command's name
// already says where a message comes from, and a user of the command does
// not know the packages.
var libraryPrefix = regexp.MustCompile(`netcode/[a-z]+: `)

// plainError is err's message for a user of the command.
func plainError(err error) string {
	return libraryPrefix.ReplaceAllString(err.Error(), "")
}

// errUsage reports a command line the flag package already complained about.
var errUsage = errors.New("usage")

// flagSet is a command's flags. Its usage goes to stdout when asked for with
// -h, and to stderr after a command-line error.
type flagSet struct {
	*flag.FlagSet
	name, synopsis string
	stdout         io.Writer
}

// newFlags returns the flag set of the command name. synopsis follows the
// command's name in the usage line; it may go on with a description after
// a blank line.
func newFlags(name, synopsis string, stdout, stderr io.Writer) *flagSet {
	fs := &flagSet{FlagSet: flag.NewFlagSet("netcode "+name, flag.ContinueOnError), name: name, synopsis: synopsis, stdout: stdout}
	fs.SetOutput(stderr)
	fs.FlagSet.Usage = func() {} // parse prints the usage, to the right stream
	return fs
}

// usage writes the command's usage and every flag with its description to w.
func (fs *flagSet) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: netcode %s %s\n", fs.name, fs.synopsis)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintf(w, "\nflags:\n")
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
}

// parse parses args, printing the usage to stdout for -h (and returning
// flag.ErrHelp) or to stderr after an error (returning errUsage). Unless
// positional arguments are wanted (nargs < 0: any number), it rejects a
// number of them other than nargs.
func (fs *flagSet) parse(args []string, nargs int) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.usage(fs.stdout)
			return err
		}
		fs.usage(fs.Output())
		return errUsage
	}
	switch {
	case nargs >= 0 && fs.NArg() > nargs:
		fmt.Fprintf(fs.Output(), "unexpected argument %q\n", fs.Arg(nargs))
	case nargs >= 0 && fs.NArg() < nargs:
		fmt.Fprintf(fs.Output(), "missing argument\n")
	default:
		return nil
	}
	fs.usage(fs.Output())
	return errUsage
}

// parse parses the flags of a command that takes no positional argument.
func parse(fs *flagSet, args []string) error { return fs.parse(args, 0) }
