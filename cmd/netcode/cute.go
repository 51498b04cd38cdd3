package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/cute"
	"github.com/gonetcode/netcode/fleet"
	"github.com/gonetcode/netcode/metrics"
)

// cuteCommands are the Cute Protocol dialect's commands: "netcode cute
// keygen", and so on.
var cuteCommands = []command{
	{"keygen", "print a new signing key pair's secret key (the public key is its second half)", runCuteKeygen},
	{"token", "mint a Cute connect token", runCuteToken},
	{"inspect", "print the public part of a Cute connect token", runCuteInspect},
	{"serve", "run a Cute echo server", runCuteServe},
	{"client", "connect with a Cute token and echo payloads", runCuteClient},
}

// runCute runs a Cute subcommand.
func runCute(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("cute", "<command> [flags]\n\nThe Cute Protocol 1.00 (Cute Framework's dialect). Commands:\n"+cuteSummary(), stdout, stderr)
	if err := fs.parse(args, -1); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.usage(fs.Output())
		return errUsage
	}
	for _, c := range cuteCommands {
		if c.name == fs.Arg(0) {
			return c.run(ctx, fs.Args()[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(fs.Output(), "unknown cute command %q\n", fs.Arg(0))
	fs.usage(fs.Output())
	return errUsage
}

func cuteSummary() string {
	var b strings.Builder
	for _, c := range cuteCommands {
		fmt.Fprintf(&b, "  %-8s %s\n", c.name, c.summary)
	}
	return strings.TrimRight(b.String(), "\n")
}

func runCuteKeygen(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("cute keygen", "[-o file]\n\nPrints a new secret key in hex: 64 bytes, the signing scalar then the public key.\nThe token service and the game servers share it.", stdout, stderr)
	out := fs.String("o", "", "write the secret key to this file (created with mode 0600; an existing file is never overwritten) instead of stdout")
	if err := parse(fs, args); err != nil {
		return err
	}
	_, sk := cute.GenerateKeyPair()
	text := hex.EncodeToString(sk[:]) + "\n"
	if *out == "" {
		_, err := io.WriteString(stdout, text)
		return err
	}
	return writeNew(*out, []byte(text))
}

// parseCuteKey reads a Cute secret key: 128 hex digits, or a file holding
// them.
func parseCuteKey(s string) (cute.SecretKey, error) {
	var k cute.SecretKey
	if s == "" {
		return k, errors.New("no key: give -key a secret key in hex or a key file (netcode cute keygen -o server.key makes one)")
	}
	text := s
	where := "-key"
	if _, err := os.Lstat(s); err == nil {
		b, err := os.ReadFile(s)
		if err != nil {
			return k, err
		}
		text, where = string(bytes.TrimSpace(b)), "key file "+s
	}
	b, err := hex.DecodeString(strings.TrimSpace(text))
	if err != nil || len(b) != len(k) {
		if _, nerr := crypto.ParseKey([]byte(text)); nerr == nil || errors.Is(nerr, crypto.ErrZeroKey) {
			return k, fmt.Errorf("%s: a netcode key (32 bytes), not a %d-byte Cute secret key: netcode cute keygen makes one", where, len(k))
		}
		return k, fmt.Errorf("%s: not a %d-byte Cute secret key in hex (netcode cute keygen makes one)", where, len(k))
	}
	copy(k[:], b)
	if k == (cute.SecretKey{}) {
		return k, fmt.Errorf("%s: %w", where, cute.ErrZeroKey)
	}
	return k, nil
}

func runCuteToken(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("cute token", "-key KEY -server host:port [-server host:port ...] [flags]", stdout, stderr)
	key := fs.String("key", "", "secret key shared with the servers: hex or a key file (required)")
	app := fs.Uint64("app", 0, "application id, as the servers and clients have it")
	clientID := fs.Uint64("client-id", 0, "client id; 0 picks a random one")
	var servers addrsFlag
	fs.Var(&servers, "server", "server address the client tries, in order (repeat for up to 32; required)")
	expire := fs.Int64("expire", cute.DefaultExpireSeconds, "token lifetime in seconds")
	handshake := fs.Int("handshake-timeout", cute.DefaultHandshakeTimeoutSeconds, "each server's handshake timeout in seconds")
	userData := fs.String("user-data", "", "up to 256 bytes of user data for the server, in hex")
	out := fs.String("o", "", "write the token to this file (mode 0600) instead of stdout")
	b64 := fs.Bool("base64", false, "write the token in base64 with a newline (a terminal always gets base64; otherwise the default is the 1114 raw bytes)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if len(servers) == 0 {
		return errors.New("no server: give at least one -server host:port")
	}
	sk, err := parseCuteKey(*key)
	if err != nil {
		return err
	}
	p := cute.TokenParams{
		ApplicationID:           *app,
		ClientID:                *clientID,
		SecretKey:               sk,
		ServerAddrs:             servers,
		ExpireSeconds:           *expire,
		HandshakeTimeoutSeconds: int32(*handshake),
	}
	if err := userDataAndID(*userData, p.UserData[:], &p.ClientID); err != nil {
		return err
	}
	tok, err := cute.GenerateToken(&p)
	if err != nil {
		return err
	}
	return writeToken(tok, *out, *b64, stdout)
}

func runCuteInspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("cute inspect", "TOKEN-FILE\n\nPrints the public part of a Cute connect token, raw or base64, read from\nTOKEN-FILE or, if it is -, from standard input.", stdout, stderr)
	if err := fs.parse(args, 1); err != nil {
		return err
	}
	b, err := readTokenSize(ctx, fs.Arg(0), cute.ConnectTokenBytes)
	if err != nil {
		return err
	}
	t, err := cute.ParseToken(b)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "application id:    %#x\n", t.ApplicationID)
	fmt.Fprintf(stdout, "created:           %s\n", t.Created.UTC().Format(time.RFC3339))
	fmt.Fprintf(stdout, "expires:           %s\n", expiry(uint64(t.Expires.Unix()), inspectNow()))
	fmt.Fprintf(stdout, "handshake timeout: %v\n", t.HandshakeTimeout)
	for i, a := range t.ServerAddrs {
		fmt.Fprintf(stdout, "server %d:          %s\n", i+1, a)
	}
	return nil
}

func runCuteServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("cute serve", "-key KEY [flags]\n\nRuns a Cute echo server until interrupted: each message goes back as it came,\nreliable or fire-and-forget (Cute Framework's client/server layer; -bare: the\nbare protocol layer, each payload echoed).", stdout, stderr)
	addr := fs.String("addr", "127.0.0.1:40000", "UDP address to listen on")
	network := fs.String("net", "udp", "network: udp, udp4 or udp6")
	key := fs.String("key", "", "secret key shared with the token service: hex or a key file (required)")
	app := fs.Uint64("app", 0, "application id")
	maxClients := fs.Int("max-clients", cute.DefaultMaxClients, "client slots")
	public := fs.String("public-addr", "", "host:port the tokens name this server by (default: the bound address)")
	verbose := fs.Bool("v", false, "log connections to stderr")
	bare := fs.Bool("bare", false, "speak the bare protocol layer, without Cute Framework's client/server layer")
	metricsAddr := fs.String("metrics", "", "serve Prometheus metrics at http://ADDR/metrics, and /healthz and /readyz (off if empty)")
	regFlags := addRegistryFlags(fs) // the registry's protocol id is -app
	drainFor := fs.Duration("drain", 25*time.Second, "on SIGTERM or SIGINT, deny new clients and give connected ones up to this long to leave before closing (a second signal closes at once)")
	if err := parse(fs, args); err != nil {
		return err
	}
	sk, err := parseCuteKey(*key)
	if err != nil {
		return err
	}
	if err := checkAddrs(map[string]string{"-addr": *addr, "-public-addr": *public, "-metrics": *metricsAddr}); err != nil {
		return err
	}
	if err := regFlags.check(); err != nil {
		return err
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg := &cute.ServerConfig{ApplicationID: *app, PublicKey: sk.Public(), SecretKey: sk, MaxClients: *maxClients, PublicAddr: *public, BareProtocol: *bare}
	if *verbose {
		cfg.Logger = log
	}
	l, err := cute.Listen(*network, *addr, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "listening on %s\n", l.Addr())
	var ops *opsServer // nil without -metrics
	if *metricsAddr != "" {
		if ops, err = startOps(*metricsAddr, metrics.NewCuteCollector(l, nil), log); err != nil {
			l.Close()
			return err
		}
	}
	reg, err := regFlags.register(ctx, fleet.CuteSource(l), *app, *public, log)
	if err != nil {
		l.Close()
		return errors.Join(err, ops.close())
	}
	if reg != nil {
		ops.collect(fleet.NewServerCollector(reg.srv, nil))
	}
	if serveReady != nil {
		serveReady(l.Addr())
	}
	served := make(chan error, 1)
	go func() { served <- cuteEchoServe(l) }()
	select {
	case err = <-served: // the socket failed
		err = errors.Join(err, reg.close(), l.Close())
		return errors.Join(err, ops.close())
	case <-ctx.Done():
	}
	stopServing(reg, ops, cuteDrain{l}, *drainFor, log)
	err = errors.Join(reg.close(), l.Close(), <-served, ops.close())
	st := l.Stats()
	log.Info("cute echo server stopped", "opened", st.ConnectionsOpened, "timed_out", st.ConnectionsTimedOut, "denied", st.Denied)
	return err
}

// cuteEchoServe accepts clients and sends every message back as it came,
// until the Listener closes (nil) or fails.
func cuteEchoServe(l *cute.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.AcceptConn(context.Background())
		if errors.Is(err, net.ErrClosed) {
			return nil
		} else if err != nil {
			return err
		}
		wg.Go(func() {
			defer c.Close()
			b := make([]byte, cute.DefaultMaxMessageBytes)
			for {
				n, reliable, err := c.ReadMessage(b)
				if err != nil {
					return
				}
				if _, err := c.Send(b[:n], reliable); err != nil {
					return
				}
			}
		})
	}
}

func runCuteClient(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("cute client", "[flags] TOKEN-FILE\n\nConnects with a Cute token (raw or base64; - reads standard input), sends\n-echo messages (reliable, or fire-and-forget with -unreliable) and checks that\neach comes back.", stdout, stderr)
	n := fs.Int("echo", 10, "messages to send")
	size := fs.Int("size", 64, "message bytes (1..262144; with -unreliable 1..1205; with -bare 0..1205)")
	wait := fs.Duration("wait", 2*time.Second, "how long to wait for each echo")
	bare := fs.Bool("bare", false, "speak the bare protocol layer, without Cute Framework's client/server layer")
	unreliable := fs.Bool("unreliable", false, "send fire-and-forget messages")
	if err := fs.parse(args, 1); err != nil {
		return err
	}
	minSize, maxSize := 1, cute.DefaultMaxMessageBytes
	if *bare || *unreliable {
		maxSize = cute.MaxPayloadBytes // one datagram: a lost fragment is a lost message
	}
	if *bare {
		minSize = 0 // the bare protocol carries empty payloads; the layer refuses empty messages
	}
	if *size < minSize || *size > maxSize {
		return fmt.Errorf("-size %d: want %d..%d", *size, minSize, maxSize)
	}
	tok, err := readTokenSize(ctx, fs.Arg(0), cute.ConnectTokenBytes)
	if err != nil {
		return err
	}
	d := cute.Dialer{BareProtocol: *bare}
	c, err := d.DialContext(ctx, tok)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(stdout, "connected to %s as client %d\n", c.RemoteAddr(), c.ClientID())
	msg := make([]byte, *size)
	buf := make([]byte, maxSize)
	var count [8]byte
	for i := range *n {
		// The count, as much of it as fits: each echo is awaited before
		// the next message goes, so even short ones are told apart.
		binary.LittleEndian.PutUint64(count[:], uint64(i))
		copy(msg, count[:])
		if _, err := c.Send(msg, !*bare && !*unreliable); err != nil {
			return err
		}
		if err := c.SetReadDeadline(time.Now().Add(*wait)); err != nil {
			return err
		}
		got, err := c.Read(buf)
		if err != nil {
			return fmt.Errorf("echo %d: %w", i, err)
		}
		if !bytes.Equal(buf[:got], msg) {
			return fmt.Errorf("echo %d came back changed", i)
		}
	}
	fmt.Fprintf(stdout, "%d echoes of %d bytes\n", *n, *size)
	return nil
}
