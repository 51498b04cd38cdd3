package webtransport_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/bridge/internal/bridgetest"
	"github.com/gonetcode/netcode/bridge/webtransport"
)

// TestFetchInfo: a Go client reads the Info a Server serves over HTTP, as a
// page does, and dials the transport URL it names with the certificate
// hashes it pins; payloads echo.
func TestFetchInfo(t *testing.T) {
	r := newRig(t, rigConfig{})
	site := httptest.NewServer(r.srv.InfoHandler())
	t.Cleanup(site.Close)
	info, err := webtransport.FetchInfo(bridgetest.Ctx(t, 5*time.Second), nil, site.URL+"/webtransport")
	require.NoError(t, err)
	assert.Equal(t, r.transportURL, info.Transport)
	assert.Equal(t, r.relayURL, info.Relay)
	hashes, err := info.Hashes()
	require.NoError(t, err)
	assert.Equal(t, r.opts.CertificateHashes, hashes)
	r.opts = &webtransport.Options{CertificateHashes: hashes}
	require.NoError(t, bridgetest.Echo(t, r.dialTransport(t), 1, 10, false))
}

// TestFetchInfoRefuses: what is not a Server's Info fails with an error
// that says why, and a huge answer is not read whole.
func TestFetchInfoRefuses(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"not serving", http.StatusServiceUnavailable, "netcode/bridge: the WebTransport server is not serving\n", "503 Service Unavailable: netcode/bridge: the WebTransport server is not serving"},
		{"not JSON", http.StatusOK, "<html>", "invalid character"},
		{"another algorithm", http.StatusOK, `{"serverCertificateHashes":[{"algorithm":"sha-1","value":"AAAA"}]}`, `algorithm "sha-1": want sha-256`},
		{"a short hash", http.StatusOK, `{"serverCertificateHashes":[{"algorithm":"sha-256","value":"AAAA"}]}`, `hash "AAAA": not 32 bytes`},
		{"too large", http.StatusOK, `{"relay":"` + string(make([]byte, 70<<10)) + `"}`, "larger than 65536 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
			}))
			defer site.Close()
			_, err := webtransport.FetchInfo(bridgetest.Ctx(t, 5*time.Second), nil, site.URL)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}
