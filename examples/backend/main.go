// Command backend is an example netcode token backend: an HTTPS service
// that authenticates players with a bearer secret, limits how often each
// may ask, and answers POST /token with a connect token for the configured
// game servers (package backend).
//
//	netcode keygen -o server.key
//	netcode serve -key server.key -addr 127.0.0.1:40000 &
//	printf '42 %s\n' "$(openssl rand -hex 16)" > users.txt
//	go run ./examples/backend -key server.key -server 127.0.0.1:40000 -users users.txt
//
// then, with the secret from users.txt and the certificate it prints:
//
//	curl --cacert CERT -X POST -H "Authorization: Bearer SECRET" https://127.0.0.1:8443/token -o player.token
//
// With -registry redis://HOST:PORT it names, instead of -server, the least
// loaded of the game servers registered in Redis (`netcode serve
// -registry`; package fleet) in the -region, and holds each player's rate
// in Redis too, so that it holds across every replica of the backend:
//
//	go run ./examples/backend -key server.key -registry redis://127.0.0.1:6379 -region eu -users users.txt -metrics
//
// -metrics serves the Chooser's Prometheus metrics (netcode_fleet_chooser_*)
// at /metrics beside /token.
//
// Without -tls-cert and -tls-key it makes a self-signed certificate for
// localhost and writes it to a temporary file so that clients can trust
// it; give a real certificate in production. Without -users it makes up a
// secret for client id 1 and prints it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/time/rate"

	"github.com/gonetcode/netcode/backend"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/fleet"
	"github.com/gonetcode/netcode/internal/devcert"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "backend:", err)
		os.Exit(1)
	}
}

// serverList is a repeatable -server PUBLIC[=INTERNAL] flag.
type serverList []backend.Server

func (l *serverList) String() string {
	s := make([]string, len(*l))
	for i, srv := range *l {
		s[i] = srv.String()
	}
	return strings.Join(s, ",")
}

func (l *serverList) Set(v string) error {
	pub, internal, nat := strings.Cut(v, "=")
	s := backend.Server{}
	var err error
	if s.Addr, err = netip.ParseAddrPort(pub); err != nil {
		return err
	}
	if nat {
		if s.InternalAddr, err = netip.ParseAddrPort(internal); err != nil {
			return err
		}
	}
	*l = append(*l, s)
	return nil
}

// run serves until ctx is done. ready, if set, is told the HTTPS address.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, ready func(net.Addr)) error {
	fs := flag.NewFlagSet("backend", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8443", "HTTPS address to serve POST /token on")
	keyFile := fs.String("key", "", "file with the private key shared with the game servers, from netcode keygen (required)")
	var servers serverList
	fs.Var(&servers, "server", "game server a token names, PUBLIC or PUBLIC=INTERNAL host:port (repeatable, in order; required unless -registry)")
	users := fs.String("users", "", `file of players, one "CLIENT-ID SECRET" a line; without it a secret for client id 1 is made up`)
	certFile := fs.String("tls-cert", "", "TLS certificate file (PEM); without it a self-signed one is made")
	keyPEM := fs.String("tls-key", "", "TLS private key file (PEM)")
	proto := hexFlag(0x6e6574636f646531)
	fs.Var(&proto, "protocol", "protocol id (decimal or 0x hex)")
	expire := fs.Int64("expire", 30, "token lifetime in seconds")
	timeout := fs.Int("timeout", 10, "connection timeout written in the tokens, in seconds")
	perSecond := fs.Float64("rate", 1, "tokens per second each player may get in the long run")
	burst := fs.Int("burst", 5, "tokens each player may get at once")
	verbose := fs.Bool("v", false, "log every token")
	registry := fs.String("registry", "", "Redis URL of the fleet registry (package fleet): name the least loaded registered servers instead of -server, and limit rates in Redis across replicas")
	region := fs.String("region", fleet.DefaultRegion, "with -registry: the region whose servers tokens name")
	tags := fs.String("tags", "", "with -registry: comma-separated tags every named server must have")
	count := fs.Int("count", fleet.DefaultCount, "with -registry: servers a token names (1 to 32)")
	metrics := fs.Bool("metrics", false, "serve Prometheus metrics at /metrics beside /token: with -registry, the Chooser's (netcode_fleet_chooser_*)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *keyFile == "" || (len(servers) == 0) == (*registry == "") {
		fs.Usage()
		return errors.New("-key and either -server (at least one) or -registry are required")
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	key, exposed, err := crypto.ReadKeyFile(*keyFile)
	if err != nil {
		return err
	}
	if exposed {
		log.Warn("the key file is readable by other users; anyone with the key can mint tokens", "file", *keyFile)
	}
	auth, err := loadUsers(*users, stdout)
	if err != nil {
		return err
	}
	cfg := backend.Config{
		ProtocolID:     uint64(proto),
		PrivateKey:     key,
		Authenticate:   auth.authenticate,
		Servers:        servers,
		ExpireSeconds:  *expire,
		TimeoutSeconds: int32(*timeout),
		Rate:           rate.Limit(*perSecond),
		Burst:          *burst,
		Challenge:      `Bearer realm="netcode"`,
		Logger:         log,
	}
	reg := prometheus.NewRegistry()
	if *registry != "" {
		ch, closeFleet, err := useFleet(ctx, &cfg, *registry, *region, *tags, *count, log)
		if err != nil {
			return err
		}
		defer closeFleet()
		reg.MustRegister(fleet.NewChooserCollector(ch, nil))
	}
	h, err := backend.NewHandler(&cfg)
	if err != nil {
		return err
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if *certFile != "" || *keyPEM != "" {
		c, err := tls.LoadX509KeyPair(*certFile, *keyPEM)
		if err != nil {
			return err
		}
		tlsCfg.Certificates = []tls.Certificate{c}
	} else {
		c, err := devcert.New("localhost", "127.0.0.1", "::1")
		if err != nil {
			return err
		}
		dir, err := os.MkdirTemp("", "netcode-backend-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "cert.pem")
		if err := os.WriteFile(path, c.CertPEM, 0o644); err != nil {
			return err
		}
		tlsCfg.Certificates = []tls.Certificate{c.TLS}
		log.Warn("no -tls-cert: serving a self-signed certificate for development", "cert", path)
	}

	mux := http.NewServeMux()
	mux.Handle("/token", h)
	if *metrics {
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           mux,
		TLSConfig:         tlsCfg,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
	log.Info("netcode token backend serving", "url", "https://"+ln.Addr().String()+"/token", "servers", servers.String(), "registry", *registry)
	if ready != nil {
		ready(ln.Addr())
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// useFleet makes cfg choose servers from the registry at url and limit
// rates there; it returns the Chooser and a function that closes it and
// the Redis client.
func useFleet(ctx context.Context, cfg *backend.Config, url, region, tags string, count int, log *slog.Logger) (*fleet.Chooser, func(), error) {
	tagList, err := fleet.ParseTags(tags)
	if err != nil {
		return nil, nil, err
	}
	rdb, err := fleet.NewClient(url)
	if err != nil {
		return nil, nil, err
	}
	lim, err := fleet.NewRateLimiter(rdb, "", cfg.Rate, cfg.Burst)
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	ch, err := fleet.NewChooser(ctx, fleet.ChooserConfig{
		Client:     rdb,
		ProtocolID: cfg.ProtocolID,
		Regions:    []string{region},
		Count:      count,
		Query: func(*http.Request, backend.Identity) (fleet.Query, error) {
			return fleet.Query{Tags: tagList}, nil
		},
		Logger: log,
	})
	if ch == nil {
		rdb.Close()
		return nil, nil, err
	}
	if err != nil {
		// Redis may come up after the backend: it answers 503 until then.
		log.Warn("the registry cannot be read yet; answering 503 until it can", "err", err)
	}
	cfg.Servers = nil
	cfg.ChooseServers = ch.ChooseServers
	cfg.Limiter = lim
	return ch, func() {
		ch.Close()
		rdb.Close()
	}, nil
}

// hexFlag is a uint64 flag read in decimal or 0x hex and shown in hex, as
// the netcode command shows protocol ids.
type hexFlag uint64

func (f *hexFlag) String() string { return fmt.Sprintf("%#x", uint64(*f)) }

func (f *hexFlag) Set(s string) error {
	v, err := strconv.ParseUint(s, 0, 64)
	*f = hexFlag(v)
	return err
}

// user is a player known by the SHA-256 of its bearer secret.
type user struct {
	id  uint64
	sum [sha256.Size]byte
}

// bearerAuth authenticates "Authorization: Bearer SECRET" against a list of
// players.
type bearerAuth []user

// authenticate compares the secret's hash with every player's, in constant
// time and without stopping at a match, so the time taken says nothing
// about which secrets exist.
func (a bearerAuth) authenticate(r *http.Request) (backend.Identity, error) {
	v := r.Header.Get("Authorization")
	scheme, secret, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return backend.Identity{}, backend.ErrUnauthorized
	}
	sum := sha256.Sum256([]byte(secret))
	var id uint64
	for _, u := range a {
		match := subtle.ConstantTimeCompare(sum[:], u.sum[:])
		id |= u.id & -uint64(match) // u.id if match == 1, else 0
	}
	if id == 0 {
		return backend.Identity{}, backend.ErrUnauthorized
	}
	return backend.Identity{ClientID: id}, nil
}

// loadUsers reads a users file, or makes up one player and prints its
// secret.
func loadUsers(name string, stdout io.Writer) (bearerAuth, error) {
	if name == "" {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		secret := hex.EncodeToString(b[:])
		fmt.Fprintf(stdout, "no -users: client id 1 has the bearer secret %s\n", secret)
		return bearerAuth{{id: 1, sum: sha256.Sum256([]byte(secret))}}, nil
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var a bearerAuth
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("%s:%d: want CLIENT-ID SECRET", name, n)
		}
		id, err := strconv.ParseUint(f[0], 0, 64)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("%s:%d: client id must be a number above 0", name, n)
		}
		if len(f[1]) < 16 {
			return nil, fmt.Errorf("%s:%d: secret shorter than 16 characters", name, n)
		}
		u := user{id: id, sum: sha256.Sum256([]byte(f[1]))}
		for _, o := range a {
			if o.sum == u.sum {
				return nil, fmt.Errorf("%s:%d: the same secret as client id %d", name, n, o.id)
			}
		}
		a = append(a, u)
	}
	if len(a) == 0 {
		return nil, fmt.Errorf("%s: no users", name)
	}
	return a, sc.Err()
}
