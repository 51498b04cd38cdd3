package webtransport

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// maxInfoBytes bounds the Info document FetchInfo reads: a real one is a
// few hundred bytes.
const maxInfoBytes = 64 << 10

// FetchInfo reads the Info that a Server's InfoHandler serves at url (for
// example http://127.0.0.1:8080/webtransport, where netcode bridge
// -webtransport and the examples mount it), as a page does before it opens
// its session: a Go client learns the session URLs and, in development, the
// certificate hashes to pin, which Info.Hashes decodes for
// Options.CertificateHashes. client nil means http.DefaultClient.
func FetchInfo(ctx context.Context, client *http.Client, url string) (Info, error) {
	var info Info
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return info, fmt.Errorf("netcode/bridge: WebTransport info: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return info, fmt.Errorf("netcode/bridge: WebTransport info: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxInfoBytes+1))
	if err != nil {
		return info, fmt.Errorf("netcode/bridge: WebTransport info from %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return info, fmt.Errorf("netcode/bridge: WebTransport info from %s: %s: %s", url, resp.Status, firstLine(body))
	}
	if len(body) > maxInfoBytes {
		return info, fmt.Errorf("netcode/bridge: WebTransport info from %s: larger than %d bytes", url, maxInfoBytes)
	}
	if err := json.Unmarshal(body, &info); err != nil {
		return Info{}, fmt.Errorf("netcode/bridge: WebTransport info from %s: %w", url, err)
	}
	if _, err := info.Hashes(); err != nil {
		return Info{}, fmt.Errorf("netcode/bridge: WebTransport info from %s: %w", url, err)
	}
	return info, nil
}

// Hashes decodes i's ServerCertificateHashes for Options.CertificateHashes:
// nil when the Server has a production certificate.
func (i Info) Hashes() ([][32]byte, error) {
	var hashes [][32]byte
	for _, h := range i.ServerCertificateHashes {
		if h.Algorithm != "sha-256" {
			return nil, fmt.Errorf("certificate hash algorithm %q: want sha-256", h.Algorithm)
		}
		b, err := base64.StdEncoding.DecodeString(h.Value)
		if err != nil || len(b) != 32 {
			return nil, fmt.Errorf("certificate hash %q: not 32 bytes in standard base64", h.Value)
		}
		hashes = append(hashes, [32]byte(b))
	}
	return hashes, nil
}

// firstLine returns the first line of an error body, at most 200 bytes.
func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
