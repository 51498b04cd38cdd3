package metrics_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/cute"
	"github.com/gonetcode/netcode/internal/testing/loopback"
	"github.com/gonetcode/netcode/metrics"
	nctoken "github.com/gonetcode/netcode/token"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fixed netcode.ServerStats

func (f fixed) Stats() netcode.ServerStats { return netcode.ServerStats(f) }

// TestEveryField: every ServerStats field is exported, by a metric whose
// help names it, with the field's value.
func TestEveryField(t *testing.T) {
	checkEveryField(t, "ServerStats.", func(st netcode.ServerStats, labels prometheus.Labels) prometheus.Collector {
		return metrics.NewCollector(fixed(st), labels)
	})
}

// checkEveryField gives every field of a Stats type S a value of its own,
// and checks that the collector newC makes exports each, by a metric whose
// help names it ("(" + prefix + field + ")."), with that value.
func checkEveryField[S any](t *testing.T, prefix string, newC func(S, prometheus.Labels) prometheus.Collector) {
	var st S
	v := reflect.ValueOf(&st).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Int:
			f.SetInt(int64(100 + i))
		case reflect.Uint64:
			f.SetUint(uint64(100 + i))
		case reflect.Bool:
			f.SetBool(true)
		default:
			t.Fatalf("%s%s has kind %s: teach the collector", prefix, v.Type().Field(i).Name, f.Kind())
		}
	}
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(newC(st, prometheus.Labels{"server": "eu-1"})))
	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range families {
		if mf.GetName() == "netcode_build_info" {
			continue // TestBuildInfo
		}
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
		_, field, ok := strings.Cut(help, "("+prefix)
		require.True(t, ok, "help of %s names no field", mf.GetName())
		got[strings.TrimSuffix(field, ").")] = val
	}
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		require.Contains(t, got, name, "%s%s is not exported", prefix, name)
		want := float64(100 + i)
		if v.Field(i).Kind() == reflect.Bool {
			want = 1
		}
		assert.Equal(t, want, got[name], name)
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
			scrape := scraper(t, reg)
			assert.Contains(t, scrape(), "netcode_server_clients 0\n")
			families, err := reg.Gather()
			require.NoError(t, err)
			assert.Len(t, families, reflect.TypeFor[netcode.ServerStats]().NumField()+1, "one metric per ServerStats field, and the build's")

			tok, err := nctoken.Generate(&nctoken.Params{ProtocolID: 9, ClientID: 5, PrivateKey: key,
				ServerAddrs: loopback.AddrPorts(t, l.Addr()), ExpireSeconds: 30, TimeoutSeconds: 5})
			require.NoError(t, err)
			loopback.Connect(t, l, tok)
			out := scrape()
			assert.Contains(t, out, "netcode_server_clients 1\n")
			assert.Contains(t, out, "netcode_server_connections_opened_total 1\n")
			assert.Contains(t, out, "# TYPE netcode_server_connections_opened_total counter\n")
			// The handshake's packets, both ways: a request (1078 bytes), a
			// challenge, a response, a keep-alive at least.
			st := l.Stats()
			assert.GreaterOrEqual(t, st.PacketsReceived, uint64(2))
			assert.GreaterOrEqual(t, st.BytesReceived, uint64(1078))
			assert.GreaterOrEqual(t, st.PacketsSent, uint64(2))
			assert.Greater(t, st.BytesSent, uint64(0))
			assert.Contains(t, out, "netcode_server_draining 0\n")
			l.Drain()
			assert.Contains(t, scrape(), "netcode_server_draining 1\n")
		})
	}
}

// scraper serves reg over HTTP until t ends, and returns what scrapes it.
func scraper(t *testing.T, reg *prometheus.Registry) func() string {
	hs := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(hs.Close)
	return func() string {
		resp, err := http.Get(hs.URL)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
}

// TestBuildInfo: netcode_build_info is 1, labelled with the release and
// the Go version.
func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(metrics.NewCollector(fixed{}, prometheus.Labels{"server": "eu-1"})))
	families, err := reg.Gather()
	require.NoError(t, err)
	var found bool
	for _, mf := range families {
		if mf.GetName() != "netcode_build_info" {
			continue
		}
		found = true
		assert.Equal(t, "GAUGE", mf.GetType().String())
		require.Len(t, mf.GetMetric(), 1)
		m := mf.GetMetric()[0]
		assert.Equal(t, 1.0, m.GetGauge().GetValue())
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		assert.Equal(t, map[string]string{"server": "eu-1", "version": netcode.Version, "goversion": runtime.Version()}, labels)
	}
	assert.True(t, found, "no %s", "netcode_build_info")
}

// TestPromlint: every metric passes Prometheus's own linter (names, units,
// counters' _total, help text), netcode's and Cute's.
func TestPromlint(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(metrics.NewCollector(fixed{}, prometheus.Labels{"dialect": "netcode"})))
	require.NoError(t, reg.Register(metrics.NewCuteCollector(fixedCute{}, prometheus.Labels{"dialect": "cute"})))
	families, err := reg.Gather()
	require.NoError(t, err)
	problems, err := promlint.NewWithMetricFamilies(families).Lint()
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// TestNamesDocumented: the documentation of each ServerStats field (in
// stats.go) and each cute.Stats field (in cute/stats.go) names the metric
// that exports it, so that a reader of either finds the other.
func TestNamesDocumented(t *testing.T) {
	checkNamesDocumented(t, "../stats.go", "ServerStats", reflect.TypeFor[netcode.ServerStats]().NumField(), metrics.NewCollector(fixed{}, nil))
	checkNamesDocumented(t, "../cute/stats.go", "Stats", reflect.TypeFor[cute.Stats]().NumField(), metrics.NewCuteCollector(fixedCute{}, nil))
}

// checkNamesDocumented checks that the doc of each field of the struct
// typeName in file names the metric of c whose help names the field.
func checkNamesDocumented(t *testing.T, file, typeName string, fields int, c prometheus.Collector) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
	require.NoError(t, err)
	docs := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != typeName {
			return true
		}
		for _, fld := range ts.Type.(*ast.StructType).Fields.List {
			for _, name := range fld.Names {
				docs[name.Name] = fld.Doc.Text()
			}
		}
		return false
	})
	require.Len(t, docs, fields)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range families {
		_, field, ok := strings.Cut(mf.GetHelp(), "Stats.")
		if !ok {
			continue
		}
		field = strings.TrimSuffix(field, ").")
		assert.Contains(t, strings.Join(strings.Fields(docs[field]), " "), mf.GetName(), "the documentation of %s.%s", typeName, field)
	}
}

// TestReadmeListsEverySeries: the Observability page (docs/observability.md)
// names every series the collectors serve: netcode's server's, Cute's and
// the wire's.
func TestReadmeListsEverySeries(t *testing.T) {
	readme, err := os.ReadFile("../docs/observability.md")
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(metrics.NewCollector(fixed{}, prometheus.Labels{"dialect": "netcode"})))
	require.NoError(t, reg.Register(metrics.NewWireCollector(fixedWire{}, prometheus.Labels{"dialect": "netcode"})))
	require.NoError(t, reg.Register(metrics.NewCuteCollector(fixedCute{}, prometheus.Labels{"dialect": "cute"})))
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range families {
		assert.Contains(t, string(readme), "`"+mf.GetName(), "docs/observability.md does not list %s", mf.GetName())
	}
}
