package metrics_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/loopback"
	"github.com/gonetcode/netcode/metrics"
	"github.com/gonetcode/netcode/token"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fixed netcode.ServerStats

func (f fixed) Stats() netcode.ServerStats { return netcode.ServerStats(f) }

// TestEveryField: every ServerStats field is exported, by a metric whose
// help names it, with the field's value.
func TestEveryField(t *testing.T) {
	var st netcode.ServerStats
	v := reflect.ValueOf(&st).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Int:
			f.SetInt(int64(100 + i))
		case reflect.Uint64:
			f.SetUint(uint64(100 + i))
		default:
			t.Fatalf("ServerStats.%s has kind %s: teach the collector", v.Type().Field(i).Name, f.Kind())
		}
	}
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(metrics.NewCollector(fixed(st), prometheus.Labels{"server": "eu-1"})))
	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range families {
		require.Len(t, mf.GetMetric(), 1)
		m := mf.GetMetric()[0]
		require.Len(t, m.GetLabel(), 1)
		assert.Equal(t, "eu-1", m.GetLabel()[0].GetValue())
		val := m.GetGauge().GetValue()
		if strings.HasSuffix(mf.GetName(), "_total") {
			assert.Equal(t, "COUNTER", mf.GetType().String(), mf.GetName())
			val = m.GetCounter().GetValue()
		}
		help := mf.GetHelp()
		_, field, ok := strings.Cut(help, "(ServerStats.")
		require.True(t, ok, "help of %s names no field", mf.GetName())
		got[strings.TrimSuffix(field, ").")] = val
	}
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		require.Contains(t, got, name, "ServerStats.%s is not exported", name)
		assert.Equal(t, float64(100+i), got[name], name)
	}
	assert.Len(t, got, v.NumField())
}

// TestListener scrapes a real server on loopback over HTTP before and after
// a client connects.
func TestListener(t *testing.T) {
	for _, f := range loopback.Families {
		t.Run(f.Name, func(t *testing.T) {
			f.Require(t)
			key := crypto.Key{7, 7, 7}
			l, err := netcode.Listen(f.Network, f.Addr, &netcode.ServerConfig{ProtocolID: 9, PrivateKey: key})
			require.NoError(t, err)
			defer l.Close()
			reg := prometheus.NewRegistry()
			c := metrics.NewCollector(l, nil)
			reg.MustRegister(c)
			hs := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
			defer hs.Close()
			scrape := func() string {
				resp, err := http.Get(hs.URL)
				require.NoError(t, err)
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				return string(b)
			}
			assert.Contains(t, scrape(), "netcode_server_clients 0\n")
			families, err := reg.Gather()
			require.NoError(t, err)
			assert.Len(t, families, reflect.TypeFor[netcode.ServerStats]().NumField(), "one metric per ServerStats field")

			tok, err := token.Generate(token.Params{ProtocolID: 9, ClientID: 5, PrivateKey: key,
				ServerAddrs: loopback.AddrPorts(t, l.Addr()), ExpireSeconds: 30, TimeoutSeconds: 5})
			require.NoError(t, err)
			loopback.Connect(t, l, tok)
			out := scrape()
			assert.Contains(t, out, "netcode_server_clients 1\n")
			assert.Contains(t, out, "netcode_server_connections_opened_total 1\n")
			assert.Contains(t, out, "# TYPE netcode_server_connections_opened_total counter\n")
		})
	}
}
