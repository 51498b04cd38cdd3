package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gonetcode/netcode/token"
)

// maxTokenText bounds what the tool reads as a connect token: the 2048 raw
// bytes, or their 2732 characters of base64 with room for line breaks and
// surrounding space.
const maxTokenText = 4096

// errTokenTooLarge reports token input over maxTokenText bytes.
var errTokenTooLarge = fmt.Errorf("more than %d bytes: not a connect token", maxTokenText)

// decodeToken accepts a connect token as its raw bytes or as base64 text
// (standard or URL alphabet, padded or not, line breaks allowed).
func decodeToken(b []byte) ([]byte, error) { return decodeTokenSize(b, token.ConnectTokenBytes) }

// decodeTokenSize is decodeToken for a dialect's token of size bytes.
func decodeTokenSize(b []byte, size int) ([]byte, error) {
	if len(b) == size {
		return b, nil
	}
	text := strings.Join(strings.Fields(string(b)), "")
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if d, err := enc.DecodeString(text); err == nil && len(d) == size {
			return d, nil
		}
	}
	return nil, fmt.Errorf("%d bytes, neither a %d-byte connect token nor one in base64", len(b), size)
}

// readBounded reads r to its end, failing with errTokenTooLarge after
// maxTokenText bytes. The read runs in its own goroutine so that ctx (a
// signal) ends the wait even when r is a terminal or a pipe that never
// ends; that goroutine then stays blocked in Read until r delivers or the
// process exits.
func readBounded(ctx context.Context, r io.Reader) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(r, maxTokenText+1))
		done <- result{b, err}
	}()
	select {
	case res := <-done:
		if res.err == nil && len(res.b) > maxTokenText {
			res.err = errTokenTooLarge
		}
		return res.b, res.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// readToken reads a connect token, raw or base64, from the file name, or
// from standard input if name is "-".
func readToken(ctx context.Context, name string) ([]byte, error) {
	return readTokenSize(ctx, name, token.ConnectTokenBytes)
}

// readTokenSize is readToken for a dialect's token of size bytes.
func readTokenSize(ctx context.Context, name string, size int) ([]byte, error) {
	r := stdinOf(ctx)
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	} else {
		name = "standard input"
	}
	b, err := readBounded(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	tok, err := decodeTokenSize(b, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return tok, nil
}

// tokenBackend describes how to ask an HTTP(S) token backend for a token.
type tokenBackend struct {
	method string // POST unless set
	auth   string // bearer token, if any
	caFile string // PEM file of the CA that signed the backend's certificate, if private
}

// fetch asks the backend at url for a connect token. The answer is the raw
// token (application/octet-stream) or its base64 text.
func (b tokenBackend) fetch(ctx context.Context, url string) ([]byte, error) {
	client := &http.Client{Timeout: 15 * time.Second}
	if b.caFile != "" {
		pem, err := os.ReadFile(b.caFile)
		if err != nil {
			return nil, fmt.Errorf("-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-ca %s: no PEM certificate in it", b.caFile)
		}
		client.Transport = &http.Transport{
			Proxy:           http.ProxyFromEnvironment,
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		}
	}
	method := b.method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/octet-stream, text/plain")
	if b.auth != "" {
		req.Header.Set("Authorization", "Bearer "+b.auth)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenText+1))
	if err != nil {
		return nil, fmt.Errorf("token backend %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := string(bytes.TrimSpace(body))
		if len(msg) > 200 || !printable(body) || strings.EqualFold(msg, http.StatusText(resp.StatusCode)) {
			// Nothing to add to the status (the backend package
			// answers with the status text alone).
			return nil, fmt.Errorf("token backend %s: %s", url, resp.Status)
		}
		return nil, fmt.Errorf("token backend %s: %s: %s", url, resp.Status, msg)
	}
	if len(body) > maxTokenText {
		return nil, fmt.Errorf("token backend %s: %w", url, errTokenTooLarge)
	}
	tok, err := decodeToken(body)
	if err != nil {
		return nil, fmt.Errorf("token backend %s: %w", url, err)
	}
	return tok, nil
}

// isURL reports whether s names an HTTP(S) token backend.
func isURL(s string) bool {
	return strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://")
}

// printable reports whether b is plain ASCII text, fit to quote in an error.
func printable(b []byte) bool {
	for _, c := range b {
		if (c < 0x20 || c > 0x7e) && c != '\n' && c != '\r' && c != '\t' {
			return false
		}
	}
	return true
}
