package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/gonetcode/netcode/token"
)

// addrsFlag is a repeatable "host:port" flag.
type addrsFlag []netip.AddrPort

func (a *addrsFlag) String() string { return joinValues(*a) }

// joinValues lists values separated by commas: a repeatable flag's
// String, and a list of addresses in a message.
func joinValues[T fmt.Stringer](vs []T) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = v.String()
	}
	return strings.Join(s, ",")
}

func (a *addrsFlag) Set(s string) error {
	ap, err := resolveAddr(s)
	if err != nil {
		return err
	}
	*a = append(*a, ap)
	return nil
}

// resolveAddr turns "host:port" into an address a token can carry: a
// literal address, or the first address the host name resolves to. A token
// names concrete servers, so an unspecified address (0.0.0.0, ::) or port 0
// is refused however it is written.
func resolveAddr(s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		ua, rerr := net.ResolveUDPAddr("udp", s)
		if rerr != nil {
			return netip.AddrPort{}, rerr
		}
		ap = ua.AddrPort()
	}
	return concreteAddr(s, ap)
}

// resolveAddrs is resolveAddr giving every address a host name resolves to.
func resolveAddrs(ctx context.Context, s string) ([]netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		ap, err = concreteAddr(s, ap)
		return []netip.AddrPort{ap}, err
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return nil, err
	}
	p, err := net.LookupPort("udp", port)
	if err != nil {
		return nil, err
	}
	if host == "" {
		return nil, fmt.Errorf("%s: %w", s, token.ErrUnspecifiedAddr)
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	out := make([]netip.AddrPort, 0, len(ips))
	for _, ip := range ips {
		ap, err := concreteAddr(s, netip.AddrPortFrom(ip, uint16(p)))
		if err != nil {
			return nil, err
		}
		out = append(out, ap)
	}
	return out, nil
}

// concreteAddr refuses an unspecified address or port 0, and unmaps an
// IPv4-mapped IPv6 address.
func concreteAddr(s string, ap netip.AddrPort) (netip.AddrPort, error) {
	a := ap.Addr().Unmap()
	if !a.IsValid() || a.IsUnspecified() || ap.Port() == 0 {
		return netip.AddrPort{}, fmt.Errorf("%s: %w", s, token.ErrUnspecifiedAddr)
	}
	return netip.AddrPortFrom(a, ap.Port()), nil
}

func runToken(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("token", "-key KEY -server host:port [-server host:port ...] [flags]", stdout, stderr)
	key := fs.String("key", "", "private key shared with the servers: hex, base64, or a key file (required)")
	proto := protocolFlag(defaultProtocolID)
	fs.Var(&proto, "protocol", "protocol id (decimal or 0x hex)")
	clientID := fs.Uint64("client-id", 0, "client id; 0 picks a random one")
	var servers, internal addrsFlag
	fs.Var(&servers, "server", "server address the client tries, in order (repeat for up to 32; required)")
	fs.Var(&internal, "internal", "address the server checks against, one per -server, for servers behind NAT (optional, repeatable)")
	expire := fs.Int64("expire", 30, "token lifetime in seconds; negative: never expires")
	timeout := fs.Int("timeout", 10, "connection timeout in seconds; negative disables timeouts (development only)")
	userData := fs.String("user-data", "", "up to 256 bytes of user data for the server, in hex")
	out := fs.String("o", "", "write the token to this file (mode 0600) instead of stdout")
	b64 := fs.Bool("base64", false, "write the token in base64 with a newline, even to a file or pipe (a terminal always gets base64; otherwise the default is the 2048 raw bytes)")
	if err := parse(fs, args); err != nil {
		return err
	}
	p := token.Params{
		ProtocolID:     uint64(proto),
		ClientID:       *clientID,
		ServerAddrs:    servers,
		InternalAddrs:  internal,
		ExpireSeconds:  *expire,
		TimeoutSeconds: int32(*timeout),
	}
	if int(p.TimeoutSeconds) != *timeout {
		return errors.New("-timeout out of range")
	}
	if len(servers) == 0 {
		return errors.New("no server: give at least one -server host:port")
	}
	k, err := parseKey(*key, stderr)
	if err != nil {
		return err
	}
	p.PrivateKey = k
	if err := userDataAndID(*userData, p.UserData[:], &p.ClientID); err != nil {
		return err
	}
	tok, err := token.Generate(&p)
	if err != nil {
		return err
	}
	return writeToken(tok, *out, *b64, stdout)
}

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("inspect", "TOKEN-FILE\n\nPrints the public part of a connect token, raw or base64, read from TOKEN-FILE\nor, if it is -, from standard input. Input over 4096 bytes is refused.", stdout, stderr)
	if err := fs.parse(args, 1); err != nil {
		return err
	}
	b, err := readToken(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	t, err := token.Parse(b)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "protocol id: %#x\n", t.ProtocolID)
	fmt.Fprintf(stdout, "created:     %s\n", time.Unix(int64(t.CreateTimestamp), 0).UTC().Format(time.RFC3339))
	fmt.Fprintf(stdout, "expires:     %s\n", expiry(t.ExpireTimestamp, inspectNow()))
	fmt.Fprintf(stdout, "timeout:     %d s\n", t.TimeoutSeconds)
	for i, a := range t.ServerAddrs {
		fmt.Fprintf(stdout, "server %d:    %s\n", i+1, a)
	}
	return nil
}

// inspectNow is the clock inspect compares a token's expiry with; tests
// replace it.
var inspectNow = time.Now

// expiry describes an expire timestamp as seen at now: when, and how long
// is left or that it has passed (a token is good until its expire second
// begins, as a server checks it).
func expiry(ts uint64, now time.Time) string {
	if ts > math.MaxInt64 {
		return "never"
	}
	at := time.Unix(int64(ts), 0)
	when := at.UTC().Format(time.RFC3339)
	if left := at.Sub(now); left > 0 {
		return fmt.Sprintf("%s (in %v)", when, left.Round(time.Second))
	}
	return fmt.Sprintf("%s (EXPIRED %v ago: mint a new token)", when, now.Sub(at).Round(time.Second))
}

// randomClientID returns a random, non-zero client id.
func randomClientID() (uint64, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]) | 1, nil
}

// userDataAndID fills what the token commands share: the -user-data hex
// string into userData (whose length is the most it may hold) and, when
// *id is 0 (no -client-id), a random client id.
func userDataAndID(hexData string, userData []byte, id *uint64) error {
	if hexData != "" {
		b, err := hex.DecodeString(hexData)
		if err != nil {
			return fmt.Errorf("-user-data: not hex (two hex digits a byte, up to %d bytes)", len(userData))
		}
		if len(b) > len(userData) {
			return fmt.Errorf("-user-data: %d bytes, at most %d", len(b), len(userData))
		}
		copy(userData, b)
	}
	if *id == 0 {
		r, err := randomClientID()
		if err != nil {
			return err
		}
		*id = r
	}
	return nil
}

// writeToken writes a minted token to the file out (mode 0600) or, when
// out is empty, to stdout; in base64 with -base64, or when stdout is a
// terminal.
func writeToken(tok []byte, out string, b64 bool, stdout io.Writer) error {
	if b64 || (out == "" && isTerminal(stdout)) {
		tok = []byte(base64.StdEncoding.EncodeToString(tok) + "\n")
	}
	if out == "" {
		_, err := stdout.Write(tok)
		return err
	}
	return os.WriteFile(out, tok, 0o600)
}
