package webtransport_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/bridge/internal/bridgetest"
	"github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/bridge/webtransport"
	"github.com/gonetcode/netcode/internal/testing/stacks"
)

// TestInfoBeforeServe: a page that asks for the Info before the goroutine
// running Serve has begun (a program starts it beside its HTTPS server,
// and a page may come first: cmd/netcode's bridge got 503 so under load)
// waits for Serve, and is told where the Server serves; it is refused
// (503) only if Close comes first or the page gives up.
func TestInfoBeforeServe(t *testing.T) {
	tests := []struct {
		name string
		then func(srv *webtransport.Server, cancel func())
		want int
	}{
		{"Serve begins", func(srv *webtransport.Server, _ func()) {
			go srv.Serve(bridgetest.ListenLoopback(t, "udp4", "127.0.0.1:0"))
		}, http.StatusOK},
		{"Close", func(srv *webtransport.Server, _ func()) { srv.Close() }, http.StatusServiceUnavailable},
		{"the page gives up", func(_ *webtransport.Server, cancel func()) { cancel() }, http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mux := transport.NewMux(bridgetest.ListenLoopback(t, "udp4", "127.0.0.1:0"), &transport.MuxConfig{})
			t.Cleanup(func() { mux.Close() })
			srv, err := webtransport.NewServer(&webtransport.Config{Mux: mux})
			require.NoError(t, err)
			t.Cleanup(func() { srv.Close() })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rec := httptest.NewRecorder()
			done := make(chan struct{})
			go func() {
				defer close(done)
				req := httptest.NewRequestWithContext(ctx, "GET", "https://game.example/webtransport", nil)
				srv.InfoHandler().ServeHTTP(rec, req)
			}()
			// The request waits in Info (or, on the old code, was answered 503).
			giveUp := time.After(10 * time.Second)
			for !stacks.Blocked("select", "webtransport.(*Server).Info") {
				select {
				case <-done:
					t.Fatalf("answered %d before Serve began: %s", rec.Code, rec.Body.String())
				case <-giveUp:
					t.Fatal("the request neither waited for Serve nor was answered")
				case <-time.After(time.Millisecond):
				}
			}
			tt.then(srv, cancel)
			<-done
			assert.Equal(t, tt.want, rec.Code, rec.Body.String())
			if tt.want == http.StatusOK {
				assert.Contains(t, rec.Body.String(), "https://game.example:")
			}
		})
	}
}
