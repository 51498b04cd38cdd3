// Package backend is the HTTP side of a netcode token backend: an
// http.Handler that authenticates the caller through a hook, limits how
// often each user may ask, chooses the game servers, and answers with a
// fresh connect token (package token).
//
// In a netcode deployment the web backend is the only part that holds the
// private key besides the game servers. A player's client logs in to it
// over HTTPS, receives a 2048-byte connect token naming up to 32 servers,
// and dials them (netcode.Dial, or the browser bridge). The backend keeps
// no session state: every token is minted from the request and the
// configuration, so any number of backend replicas can run behind a load
// balancer.
//
// The handler answers POST only (405 otherwise). Its responses:
//
//	200 the token: 2048 bytes of application/octet-stream, or its base64
//	    text (text/plain) when the request's Accept header asks for
//	    text/plain and not application/octet-stream
//	401 the Authenticate hook returned ErrUnauthorized
//	403 the Authenticate hook returned ErrForbidden
//	405 not a POST
//	429 the user asked too often; Retry-After says when to try again
//	503 ChooseServers returned ErrNoServers (Retry-After: 1)
//	500 anything else; the details go to Config.Logger, never to the caller
//
// It lives in its own package, not in package token, so that net/http and
// golang.org/x/time/rate stay out of the import graph of the game server
// and the client.
package backend

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/cute"
	"github.com/gonetcode/netcode/internal/tokenwire"
	"github.com/gonetcode/netcode/token"
)

// Errors the hooks return to choose the answer (test with errors.Is; wrap
// them to add detail for the log).
var (
	// ErrUnauthorized makes the handler answer 401 Unauthorized: no or bad
	// credentials.
	ErrUnauthorized = errors.New("netcode/backend: unauthorized")
	// ErrForbidden makes the handler answer 403 Forbidden: the caller is
	// known but may not play.
	ErrForbidden = errors.New("netcode/backend: forbidden")
	// ErrNoServers makes the handler answer 503 Service Unavailable: no
	// server has room now.
	ErrNoServers = errors.New("netcode/backend: no server available")
)

// Defaults of Config's zero fields.
const (
	// DefaultRate is Rate's default: tokens per second per user. Package
	// fleet's Redis limiter defaults to it too.
	DefaultRate = rate.Limit(1)
	// DefaultBurst is Burst's default, here and in package fleet.
	DefaultBurst = 5

	// defaultMaxUsers is MaxUsers's default.
	defaultMaxUsers = 100_000
	// defaultTimeoutSeconds is the backend's own default connection
	// timeout, as the browser example's tokens had; the token package's
	// is 5 s.
	defaultTimeoutSeconds = 10
)

// Identity is who the Authenticate hook found the caller to be.
type Identity struct {
	// ClientID is the user's netcode client id, which the server sees as
	// Conn.ClientID. It must not be 0. A server refuses a second connection
	// with a client id that is connected already. Requests are rate-limited
	// per ClientID.
	ClientID uint64
	// UserData is up to 256 bytes the server sees as Conn.UserData (zero
	// padded): a session id, a skill rating, a match id.
	UserData []byte
}

// Server is one game server a token names.
type Server struct {
	// Addr is where clients send their packets: the server's public
	// address.
	Addr netip.AddrPort
	// InternalAddr is the address the server knows itself by, when that
	// differs from Addr (a server behind NAT; see netcode.ServerConfig's
	// PublicAddr). Zero means Addr.
	InternalAddr netip.AddrPort
}

// String returns "ADDR", or "ADDR=INTERNAL" for a server behind NAT.
func (s Server) String() string {
	if s.InternalAddr.IsValid() && s.InternalAddr != s.Addr {
		return s.Addr.String() + "=" + s.InternalAddr.String()
	}
	return s.Addr.String()
}

// Config configures a Handler.
type Config struct {
	// ProtocolID is the game's protocol id, as in netcode.ServerConfig.
	ProtocolID uint64
	// PrivateKey is the key shared with the game servers (see
	// crypto.ReadKeyFile). Tokens are sealed with it. During a key
	// rotation it is the new key, once every server accepts it.
	PrivateKey crypto.Key

	// Authenticate identifies the caller; required. It returns an error
	// wrapping ErrUnauthorized or ErrForbidden to refuse the caller; any
	// other error is answered 500 and logged.
	Authenticate func(r *http.Request) (Identity, error)

	// Servers are the servers every token names, tried by the client in
	// order (1 to 32), when ChooseServers is nil.
	Servers []Server
	// ChooseServers, if set, picks the servers for each token instead of
	// Servers: by region, load, or match. Returning an error wrapping
	// ErrNoServers answers 503.
	ChooseServers func(r *http.Request, id Identity) ([]Server, error)

	// ExpireSeconds is the tokens' lifetime; 0 means 30 seconds, as in
	// token.Params.
	// A token must reach the client and the client a server within it.
	ExpireSeconds int64
	// TimeoutSeconds is the connections' timeout written in the tokens: how
	// long either side waits without hearing from the other. 0 means 10
	// seconds (token.Params's default is 5).
	TimeoutSeconds int32

	// Rate is how many tokens per second a user may get in the long run;
	// 0 means DefaultRate. Burst is how many at once; 0 means DefaultBurst.
	Rate  rate.Limit
	Burst int
	// MaxUsers bounds the users whose rate is tracked at once; 0 means
	// 100,000. A user whose limiter has refilled is forgotten
	// first; when every tracked user is active, new users are answered 429
	// until one refills.
	MaxUsers int

	// Limiter, if set, holds the per-user rate instead of the in-memory
	// limiter, which holds it per replica only: a limiter shared by every
	// replica, such as fleet.RateLimiter (in Redis). When it returns an
	// error the request is limited in memory instead, and the error is
	// logged.
	Limiter Limiter

	// Challenge is the WWW-Authenticate header sent with a 401, such as
	// `Bearer realm="game"`; empty sends none.
	Challenge string

	// Logger receives a debug line per token and the reasons for 500s; nil
	// is silent.
	Logger *slog.Logger

	// Cute, if set, makes the handler mint Cute Protocol 1.00 tokens
	// (package cute, 1114 bytes) for Cute Framework clients instead of
	// netcode tokens; ProtocolID and PrivateKey are then unused, and
	// servers behind NAT (Server.InternalAddr) are refused, as the Cute
	// token has one address list.
	Cute *CuteTokens
}

// CuteTokens are the Cute dialect's token settings.
type CuteTokens struct {
	// ApplicationID is the game's application id, as in
	// cute.ServerConfig.
	ApplicationID uint64
	// SecretKey is the deployment's signing key (cute.GenerateKeyPair),
	// which the game servers hold too.
	SecretKey cute.SecretKey
	// HandshakeTimeoutSeconds bounds each server's handshake; 0 means
	// cute.DefaultHandshakeTimeoutSeconds.
	HandshakeTimeoutSeconds int32
}

// Limiter is a per-user rate limit shared by backend replicas.
type Limiter interface {
	// Allow takes one token from the user's bucket; if there is none it
	// says how long until there is.
	Allow(ctx context.Context, clientID uint64) (ok bool, retryAfter time.Duration, err error)
}

// Handler is the token endpoint. Make one with NewHandler.
type Handler struct {
	cfg    Config
	log    *slog.Logger
	limits *limiters
}

// NewHandler checks config and returns the handler. It keeps a copy of
// *config: later changes to it have no effect.
func NewHandler(config *Config) (*Handler, error) {
	if config == nil {
		return nil, errors.New("netcode/backend: nil Config")
	}
	cfg := *config
	if cfg.Authenticate == nil {
		return nil, errors.New("netcode/backend: Config.Authenticate is required")
	}
	if cfg.Cute != nil {
		if cfg.Cute.SecretKey == (cute.SecretKey{}) {
			return nil, errors.New("netcode/backend: Config.Cute.SecretKey is all zeros")
		}
	} else if cfg.PrivateKey == (crypto.Key{}) {
		return nil, errors.New("netcode/backend: Config.PrivateKey is all zeros")
	}
	if cfg.ChooseServers == nil {
		if len(cfg.Servers) == 0 || len(cfg.Servers) > token.MaxServers {
			return nil, fmt.Errorf("netcode/backend: %d servers configured, want 1 to %d (or a ChooseServers)", len(cfg.Servers), token.MaxServers)
		}
		if _, _, err := addrs(cfg.Servers); err != nil {
			return nil, err
		}
	}
	if cfg.ExpireSeconds < 0 || cfg.TimeoutSeconds < 0 {
		return nil, errors.New("netcode/backend: negative ExpireSeconds or TimeoutSeconds")
	}
	if cfg.ExpireSeconds == 0 {
		cfg.ExpireSeconds = tokenwire.DefaultExpireSeconds
	}
	if cfg.TimeoutSeconds == 0 {
		cfg.TimeoutSeconds = defaultTimeoutSeconds
	}
	if cfg.Rate == 0 {
		cfg.Rate = DefaultRate
	}
	if cfg.Burst == 0 {
		cfg.Burst = DefaultBurst
	}
	if cfg.MaxUsers == 0 {
		cfg.MaxUsers = defaultMaxUsers
	}
	if cfg.Rate < 0 || cfg.Burst < 0 || cfg.MaxUsers < 0 {
		return nil, errors.New("netcode/backend: negative Rate, Burst or MaxUsers")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{
		cfg:    cfg,
		log:    log,
		limits: newLimiters(cfg.Rate, cfg.Burst, cfg.MaxUsers),
	}, nil
}

// addrs splits servers into the token's public and internal address
// lists, and checks them.
func addrs(servers []Server) (public, internal []netip.AddrPort, err error) {
	if len(servers) == 0 || len(servers) > token.MaxServers {
		return nil, nil, fmt.Errorf("netcode/backend: %d servers, want 1 to %d", len(servers), token.MaxServers)
	}
	public = make([]netip.AddrPort, len(servers))
	internal = make([]netip.AddrPort, len(servers))
	distinct := false
	for i, s := range servers {
		if !s.Addr.IsValid() || s.Addr.Port() == 0 || s.Addr.Addr().IsUnspecified() {
			return nil, nil, fmt.Errorf("netcode/backend: server address %v is not a concrete host:port", s.Addr)
		}
		public[i] = s.Addr
		internal[i] = s.Addr
		if s.InternalAddr.IsValid() {
			internal[i] = s.InternalAddr
			distinct = distinct || s.InternalAddr != s.Addr
		}
	}
	if !distinct {
		internal = nil
	}
	return public, internal, nil
}

// ServeHTTP answers a token request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		httpError(w, http.StatusMethodNotAllowed)
		return
	}
	id, err := h.cfg.Authenticate(r)
	switch {
	case errors.Is(err, ErrUnauthorized):
		h.log.Debug("netcode/backend: unauthorized", "remote", r.RemoteAddr, "err", err)
		if h.cfg.Challenge != "" {
			w.Header().Set("WWW-Authenticate", h.cfg.Challenge)
		}
		httpError(w, http.StatusUnauthorized)
		return
	case errors.Is(err, ErrForbidden):
		h.log.Debug("netcode/backend: forbidden", "remote", r.RemoteAddr, "err", err)
		httpError(w, http.StatusForbidden)
		return
	case err != nil:
		h.fail(w, r, "authenticate", err)
		return
	case id.ClientID == 0:
		h.fail(w, r, "authenticate", errors.New("client id 0"))
		return
	case len(id.UserData) > token.UserDataBytes:
		h.fail(w, r, "authenticate", fmt.Errorf("%d bytes of user data, at most %d", len(id.UserData), token.UserDataBytes))
		return
	}
	if ok, wait := h.allow(r, id.ClientID); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(retrySeconds(wait)))
		httpError(w, http.StatusTooManyRequests)
		return
	}
	servers := h.cfg.Servers
	if h.cfg.ChooseServers != nil {
		servers, err = h.cfg.ChooseServers(r, id)
		if errors.Is(err, ErrNoServers) {
			h.log.Debug("netcode/backend: no server available", "client_id", id.ClientID, "err", err)
			w.Header().Set("Retry-After", "1")
			httpError(w, http.StatusServiceUnavailable)
			return
		}
		if err != nil {
			h.fail(w, r, "choose servers", err)
			return
		}
	}
	public, internal, err := addrs(servers)
	if err != nil {
		h.fail(w, r, "choose servers", err)
		return
	}
	tok, err := h.generate(id, public, internal)
	if err != nil {
		h.fail(w, r, "generate", err)
		return
	}
	h.log.Debug("netcode/backend: token issued", "client_id", id.ClientID, "servers", len(public), "remote", r.RemoteAddr)
	hd := w.Header()
	hd.Set("Cache-Control", "no-store")
	if wantsText(r.Header.Values("Accept")) {
		hd.Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte(base64.StdEncoding.EncodeToString(tok) + "\n"))
		return
	}
	hd.Set("Content-Type", "application/octet-stream")
	hd.Set("Content-Length", strconv.Itoa(len(tok)))
	w.Write(tok)
}

// generate mints the token of the configured dialect.
func (h *Handler) generate(id Identity, public, internal []netip.AddrPort) ([]byte, error) {
	if c := h.cfg.Cute; c != nil {
		if internal != nil {
			return nil, errors.New("a Cute token has no internal addresses")
		}
		p := cute.TokenParams{
			ApplicationID:           c.ApplicationID,
			ClientID:                id.ClientID,
			SecretKey:               c.SecretKey,
			ServerAddrs:             public,
			ExpireSeconds:           h.cfg.ExpireSeconds,
			HandshakeTimeoutSeconds: c.HandshakeTimeoutSeconds,
		}
		copy(p.UserData[:], id.UserData)
		return cute.GenerateToken(&p)
	}
	p := token.Params{
		ProtocolID:     h.cfg.ProtocolID,
		ClientID:       id.ClientID,
		PrivateKey:     h.cfg.PrivateKey,
		ServerAddrs:    public,
		InternalAddrs:  internal,
		ExpireSeconds:  h.cfg.ExpireSeconds,
		TimeoutSeconds: h.cfg.TimeoutSeconds,
	}
	copy(p.UserData[:], id.UserData)
	return token.Generate(&p)
}

// allow applies the rate limit: Config.Limiter's, or the in-memory one
// when there is none or it fails.
func (h *Handler) allow(r *http.Request, user uint64) (bool, time.Duration) {
	if h.cfg.Limiter != nil {
		ok, wait, err := h.cfg.Limiter.Allow(r.Context(), user)
		if err == nil {
			return ok, wait
		}
		h.log.Warn("netcode/backend: shared rate limiter failed; limiting in memory", "client_id", user, "err", err)
	}
	return h.limits.allow(user, time.Now())
}

// fail answers 500 and logs why.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, op string, err error) {
	h.log.Error("netcode/backend: "+op+" failed", "remote", r.RemoteAddr, "err", err)
	httpError(w, http.StatusInternalServerError)
}

// httpError answers with the status and its standard text only.
func httpError(w http.ResponseWriter, code int) {
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, http.StatusText(code), code)
}

// wantsText reports whether the Accept header values ask for text/plain
// and not for application/octet-stream.
func wantsText(accept []string) bool {
	text, binary := false, false
	for _, v := range accept {
		for _, part := range strings.Split(v, ",") {
			mt, params, _ := strings.Cut(part, ";")
			if q, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok && strings.TrimSpace(q) == "0" {
				continue
			}
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "text/plain":
				text = true
			case "application/octet-stream":
				binary = true
			}
		}
	}
	return text && !binary
}

// retrySeconds rounds a wait up to whole seconds for Retry-After.
func retrySeconds(d time.Duration) int {
	s := math.Ceil(d.Seconds())
	if s < 1 {
		return 1
	}
	if s > 86400 {
		return 86400
	}
	return int(s)
}

// limiters is the per-user rate limit: a token bucket per client id,
// bounded in number.
type limiters struct {
	rate  rate.Limit
	burst int
	max   int

	mu        sync.Mutex // guards the fields below; held for map operations only
	users     map[uint64]*rate.Limiter
	lastSweep time.Time
}

func newLimiters(r rate.Limit, burst, maxUsers int) *limiters {
	return &limiters{rate: r, burst: burst, max: maxUsers, users: make(map[uint64]*rate.Limiter)}
}

// allow takes one token from the user's bucket; if there is none it says
// how long until there is.
func (l *limiters) allow(user uint64, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.users[user]
	if lim == nil {
		if len(l.users) >= l.max {
			l.sweep(now)
		}
		if len(l.users) >= l.max {
			return false, l.refill()
		}
		lim = rate.NewLimiter(l.rate, l.burst)
		l.users[user] = lim
	}
	res := lim.ReserveN(now, 1)
	if !res.OK() {
		return false, l.refill() // burst 0: never
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

// refill is how long a bucket takes to gain one token.
func (l *limiters) refill() time.Duration {
	if l.rate <= 0 || l.rate == rate.Inf {
		return time.Second
	}
	return time.Duration(float64(time.Second) / float64(l.rate))
}

// sweep forgets the users whose bucket is full again: a new limiter would
// be the same. It runs at most once per refill period, so a full table of
// active users costs one scan per period, not one per request.
func (l *limiters) sweep(now time.Time) {
	if now.Sub(l.lastSweep) < l.refill() {
		return
	}
	l.lastSweep = now
	for u, lim := range l.users {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.users, u)
		}
	}
}

// users returns how many users' rates the in-memory limiter tracks now.
func (h *Handler) users() int {
	h.limits.mu.Lock()
	defer h.limits.mu.Unlock()
	return len(h.limits.users)
}
