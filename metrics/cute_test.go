package metrics_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/cute"
	"github.com/gonetcode/netcode/internal/testing/loopback"
	"github.com/gonetcode/netcode/metrics"
)

type fixedCute cute.Stats

func (f fixedCute) Stats() cute.Stats { return cute.Stats(f) }

// TestCuteEveryField: every cute.Stats field is exported, by a metric
// whose help names it, with the field's value.
func TestCuteEveryField(t *testing.T) {
	checkEveryField(t, "cute.Stats.", func(st cute.Stats, labels prometheus.Labels) prometheus.Collector {
		return metrics.NewCuteCollector(fixedCute(st), labels)
	})
}

// TestCuteListener scrapes a real Cute server on loopback (IPv4 and IPv6)
// over HTTP before and after a client connects, and once it drains; a
// registry holds it beside a netcode server's collector.
func TestCuteListener(t *testing.T) {
	for _, f := range loopback.Families {
		t.Run(f.Name, func(t *testing.T) {
			f.Require(t)
			pk, sk := cute.GenerateKeyPair()
			l, err := cute.Listen(f.Network, f.Addr, &cute.ServerConfig{ApplicationID: 9, PublicKey: pk, SecretKey: sk})
			require.NoError(t, err)
			defer l.Close()
			reg := prometheus.NewRegistry()
			reg.MustRegister(metrics.NewCuteCollector(l, prometheus.Labels{"dialect": "cute"}), metrics.NewCollector(fixed{}, prometheus.Labels{"dialect": "netcode"}))
			scrape := scraper(t, reg)
			assert.Contains(t, scrape(), `netcode_cute_server_clients{dialect="cute"} 0`+"\n")
			assert.Contains(t, scrape(), `netcode_cute_server_max_clients{dialect="cute"} 32`+"\n")

			tok, err := cute.GenerateToken(&cute.TokenParams{ApplicationID: 9, ClientID: 5, SecretKey: sk,
				ServerAddrs: loopback.AddrPorts(t, l.Addr())})
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := cute.DialContext(ctx, tok)
			require.NoError(t, err)
			defer c.Close()
			s, err := l.AcceptConn(ctx)
			require.NoError(t, err)
			defer s.Close()
			out := scrape()
			assert.Contains(t, out, `netcode_cute_server_clients{dialect="cute"} 1`+"\n")
			assert.Contains(t, out, `netcode_cute_server_connections_opened_total{dialect="cute"} 1`+"\n")
			assert.Contains(t, out, "# TYPE netcode_cute_server_connections_opened_total counter\n")
			// The handshake's packets, both ways: the token packet (1024
			// bytes) and the challenge response, a challenge and the
			// CONNECTION_ACCEPTED.
			st := l.Stats()
			assert.GreaterOrEqual(t, st.PacketsReceived, uint64(2))
			assert.GreaterOrEqual(t, st.BytesReceived, uint64(cute.ConnectTokenBytes-90))
			assert.GreaterOrEqual(t, st.PacketsSent, uint64(2))
			assert.Positive(t, st.BytesSent)
			assert.Contains(t, out, `netcode_cute_server_draining{dialect="cute"} 0`+"\n")
			l.Drain()
			assert.Contains(t, scrape(), `netcode_cute_server_draining{dialect="cute"} 1`+"\n")
			families, err := reg.Gather()
			require.NoError(t, err)
			n := 0
			for _, mf := range families {
				if mf.GetName() != "netcode_build_info" {
					n++
				}
			}
			assert.Equal(t, reflect.TypeFor[cute.Stats]().NumField()+reflect.TypeFor[netcode.ServerStats]().NumField(), n, "one metric per field of each Stats")
		})
	}
}
