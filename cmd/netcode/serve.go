package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/fleet"
	netserver "github.com/gonetcode/netcode/internal/server"
	"github.com/gonetcode/netcode/metrics"
)

// serveReady, if set, is told the server's address once it listens (tests).
var serveReady func(net.Addr)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "-key KEY [-addr host:port] [flags]\n\nRuns a netcode server that echoes each payload to its sender or, with -chat,\nsends it to every other client.", stdout, stderr)
	addr := fs.String("addr", ":40000", "UDP address to listen on")
	network := fs.String("net", "udp", "network: udp, udp4 or udp6")
	key := fs.String("key", "", "private key shared with the token backend: hex, base64, or a key file (required)")
	proto := protocolFlag(defaultProtocolID)
	fs.Var(&proto, "protocol", "protocol id (decimal or 0x hex)")
	maxClients := fs.Int("max-clients", netserver.DefaultMaxClients, fmt.Sprintf("client slots (1..%d)", netserver.MaxMaxClients))
	tokenRate := fs.Int("token-rate", 0, fmt.Sprintf("most new connections a second the token history must take: the rate the backend mints tokens for this server (0: %d per slot per second, within %d..%d)", netserver.TokenRatePerSlot, netserver.MinTokenRate, netserver.MaxTokenRate))
	tokenExpiry := fs.Duration("token-expiry", 0, fmt.Sprintf("longest lifetime of the backend's tokens (netcode token -expire), which the token history remembers each for (0: %s)", netserver.DefaultTokenExpiry))
	public := fs.String("public-addr", "", "host:port the tokens name this server by (default: the bound address)")
	verbose := fs.Bool("v", false, "log connections and protocol events to stderr, one line each")
	chat := fs.Bool("chat", false, "chat mode: send each payload to every other client instead of echoing it to its sender")
	metricsAddr := fs.String("metrics", "", "serve Prometheus metrics at http://ADDR/metrics, and /healthz and /readyz (off if empty)")
	regFlags := addRegistryFlags(fs)
	drainFor := fs.Duration("drain", 25*time.Second, "on SIGTERM or SIGINT, deny new clients and give connected ones up to this long to leave before closing (a second signal closes at once)")
	if err := parse(fs, args); err != nil {
		return err
	}
	k, err := parseKey(*key, stderr)
	if err != nil {
		return err
	}
	// Every flag is checked before a socket is bound.
	if err := checkAddrs(map[string]string{"-addr": *addr, "-public-addr": *public, "-metrics": *metricsAddr}); err != nil {
		return err
	}
	if err := regFlags.check(); err != nil {
		return err
	}
	if err := checkServeLimits(*maxClients, *tokenRate, *tokenExpiry); err != nil {
		return err
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg := &netcode.ServerConfig{
		ProtocolID:  uint64(proto),
		PrivateKey:  k,
		PublicAddr:  *public,
		MaxClients:  *maxClients,
		TokenRate:   *tokenRate,
		TokenExpiry: *tokenExpiry,
	}
	if *verbose {
		cfg.Logger = log
	}
	l, err := netcode.Listen(*network, *addr, cfg)
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return fmt.Errorf("-addr: %w", err) // the bind's
	} else if err != nil {
		return err
	}
	mode := "echo"
	if *chat {
		mode = "chat"
	}
	log.Info("netcode "+mode+" server listening", "addr", l.Addr(), "protocol", proto.String(), "max_clients", *maxClients, "token_history", l.Stats().HistoryLimit)
	var ops *opsServer // nil without -metrics
	if *metricsAddr != "" {
		if ops, err = startOps(*metricsAddr, metrics.NewCollector(l, nil), log); err != nil {
			l.Close()
			return err
		}
	}
	reg, err := regFlags.register(ctx, l, uint64(proto), *public, log)
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
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		echoServe(l, log, *chat)
	}()
	<-ctx.Done()
	stopServing(reg, ops, netcodeDrain{l}, *drainFor, log)
	err = errors.Join(reg.close(), l.Close())
	wg.Wait()
	err = errors.Join(err, ops.close())
	st := l.Stats()
	log.Info("netcode "+mode+" server stopped", "opened", st.ConnectionsOpened, "timed_out", st.ConnectionsTimeout,
		"ignored", st.Ignored, "replayed", st.Replayed)
	return err
}

// echoServe accepts clients and sends every payload back to its sender or,
// in chat mode, to every other client. The library's logger reports each
// connect and disconnect; this adds a line only for a client whose read
// queue overflowed.
func echoServe(l *netcode.Listener, log *slog.Logger, chat bool) {
	var wg sync.WaitGroup
	defer wg.Wait()
	var room chatRoom
	for {
		c, err := l.AcceptConn(context.Background())
		if err != nil {
			return
		}
		if chat {
			room.join(c)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			if chat {
				defer room.leave(c)
			}
			buf := make([]byte, netcode.MaxPayloadBytes)
			for {
				n, err := c.Read(buf)
				if err != nil {
					if d := c.Dropped(); d > 0 {
						log.Info("payloads dropped by a full read queue", "client_id", c.ClientID(), "dropped", d)
					}
					return
				}
				if chat {
					room.send(c, buf[:n])
				} else if _, err := c.Write(buf[:n]); err != nil {
					return
				}
			}
		}()
	}
}

// check reports what register would refuse in the registry flags (the URL,
// the tags) without connecting, so that serve refuses them before it binds
// its socket; nil without -registry.
func (f *registryFlags) check() error {
	if f.url == "" {
		return nil
	}
	if _, err := fleet.ParseTags(f.tags); err != nil {
		return err
	}
	rdb, err := fleet.NewClient(f.url) // parses; connects on first use
	if err != nil {
		return err
	}
	return rdb.Close()
}

// checkAddrs checks that each non-empty address, by the flag that gave
// it, is a host:port (the host may be empty), so that a mistyped one is
// refused before any socket is bound.
// checkServeLimits checks -max-clients, -token-rate and -token-expiry, as
// netcode.Listen would after binding, and refuses a token history that
// Listen would cap below -token-rate × -token-expiry.
func checkServeLimits(maxClients, tokenRate int, tokenExpiry time.Duration) error {
	switch {
	case maxClients < 1 || maxClients > netserver.MaxMaxClients:
		return fmt.Errorf("-max-clients %d: want 1..%d", maxClients, netserver.MaxMaxClients)
	case tokenRate < 0:
		return fmt.Errorf("-token-rate %d: want a rate of new connections a second, or 0 for %d per slot", tokenRate, netserver.TokenRatePerSlot)
	case tokenExpiry < 0:
		return fmt.Errorf("-token-expiry %s: want the tokens' lifetime, or 0 for %s", tokenExpiry, netserver.DefaultTokenExpiry)
	}
	if n := netserver.HistoryWanted(maxClients, tokenRate, tokenExpiry); n > netserver.MaxHistory {
		rate, expiry := "-token-rate "+strconv.Itoa(tokenRate), "-token-expiry "+tokenExpiry.String()
		if tokenRate == 0 {
			rate = "the default -token-rate"
		}
		if tokenExpiry == 0 {
			expiry = "the default -token-expiry"
		}
		return fmt.Errorf("%s × %s is %d tokens to remember, over the %d a token history holds: lower either", rate, expiry, n, netserver.MaxHistory)
	}
	return nil
}

func checkAddrs(addrs map[string]string) error {
	for _, flag := range slices.Sorted(maps.Keys(addrs)) {
		a := addrs[flag]
		if a == "" {
			continue
		}
		_, port, err := net.SplitHostPort(a)
		if err == nil {
			_, err = net.LookupPort("udp", port)
		}
		if err != nil {
			return fmt.Errorf("%s %s: want host:port (%v)", flag, a, err)
		}
	}
	return nil
}
