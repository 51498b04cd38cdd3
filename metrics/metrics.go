// Package metrics exports a netcode server's counters (Listener.Stats) to
// Prometheus, and those of a Cute server (cute.Listener.Stats,
// NewCuteCollector) and of a wire relay (NewWireCollector).
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(metrics.NewCollector(listener, nil))
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// Every ServerStats field is exported under the name its documentation
// gives, with the prefix netcode_server_, and netcode_build_info says which
// build serves. The collector reads Stats at every scrape; it keeps nothing between
// scrapes and costs the server nothing in between. It lives in its own
// package so that the netcode package itself does not depend on
// github.com/prometheus/client_golang.
package metrics

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gonetcode/netcode"
)

// StatsSource is what NewCollector reads: a *netcode.Listener.
type StatsSource interface {
	Stats() netcode.ServerStats
}

// metric is one exported figure of a dialect's server Stats, S
// (netcode.ServerStats, cute.Stats).
type metric[S any] struct {
	name, help string
	kind       prometheus.ValueType
	value      func(*S) float64
}

// metrics lists every field of netcode.ServerStats (a test checks that none
// is missing), named by Prometheus conventions.
var metrics = []metric[netcode.ServerStats]{
	{"netcode_server_clients", "Clients connected now (ServerStats.Connected).", prometheus.GaugeValue,
		func(s *netcode.ServerStats) float64 { return float64(s.Connected) }},
	{"netcode_server_mappings", "Encryption mappings held now: clients connected or in the handshake (ServerStats.Mappings).", prometheus.GaugeValue,
		func(s *netcode.ServerStats) float64 { return float64(s.Mappings) }},
	{"netcode_server_mappings_limit", "Most encryption mappings held at once (ServerStats.MappingsLimit).", prometheus.GaugeValue,
		func(s *netcode.ServerStats) float64 { return float64(s.MappingsLimit) }},
	{"netcode_server_token_history", "Connect tokens remembered now, each until it expires (ServerStats.History).", prometheus.GaugeValue,
		func(s *netcode.ServerStats) float64 { return float64(s.History) }},
	{"netcode_server_token_history_limit", "Most connect tokens remembered at once (ServerStats.HistoryLimit).", prometheus.GaugeValue,
		func(s *netcode.ServerStats) float64 { return float64(s.HistoryLimit) }},
	{"netcode_server_token_history_full_total", "Connection requests with a new token refused because the token history was full (ServerStats.HistoryFull).", prometheus.CounterValue,
		func(s *netcode.ServerStats) float64 { return float64(s.HistoryFull) }},
	{"netcode_server_mappings_full_total", "Connection requests that found the encryption mapping table full and dropped the oldest handshake in progress (ServerStats.MappingsFull).", prometheus.CounterValue,
		func(s *netcode.ServerStats) float64 { return float64(s.MappingsFull) }},
	{"netcode_server_payloads_dropped_total", "Received payloads dropped because their connection's read queue was full (ServerStats.PayloadsDropped).", prometheus.CounterValue,
		func(s *netcode.ServerStats) float64 { return float64(s.PayloadsDropped) }},
	{"netcode_server_keepalives_dropped_total", "Keep-alives not sent because the send queue was full (ServerStats.KeepAlivesDropped).", prometheus.CounterValue,
		func(s *netcode.ServerStats) float64 { return float64(s.KeepAlivesDropped) }},
	{"netcode_server_send_errors_total", "Datagrams the socket refused to send (ServerStats.SendErrors).", prometheus.CounterValue,
		func(s *netcode.ServerStats) float64 { return float64(s.SendErrors) }},
	{"netcode_server_ignored_packets_total", "Datagrams dropped as malformed, unauthenticated or out of place (ServerStats.Ignored).", prometheus.CounterValue,
		func(s *netcode.ServerStats) float64 { return float64(s.Ignored) }},
	{"netcode_server_replayed_packets_total", "Datagrams dropped by replay protection (ServerStats.Replayed).", prometheus.CounterValue,
		func(s *netcode.ServerStats) float64 { return float64(s.Replayed) }},
	{"netcode_server_challenges_sent_total", "Connection challenges sent: valid connection requests (ServerStats.ChallengesSent).", prometheus.CounterValue,
		func(s *netcode.ServerStats) float64 { return float64(s.ChallengesSent) }},
	{"netcode_server_denied_sent_total", "Connection-denied packets sent: the server was full or draining (ServerStats.DeniedSent).", prometheus.CounterValue,
		func(s *netcode.ServerStats) float64 { return float64(s.DeniedSent) }},
	{"netcode_server_token_reuse_refused_total", "Connection requests refused because their token was used already (ServerStats.TokenReuseRefused).", prometheus.CounterValue,
		func(s *netcode.ServerStats) float64 { return float64(s.TokenReuseRefused) }},
	{"netcode_server_address_not_in_token_total", "Connection requests whose token names other servers (ServerStats.AddressNotInToken).", prometheus.CounterValue,
		func(s *netcode.ServerStats) float64 { return float64(s.AddressNotInToken) }},
	{"netcode_server_connections_opened_total", "Connections established (ServerStats.ConnectionsOpened).", prometheus.CounterValue,
		func(s *netcode.ServerStats) float64 { return float64(s.ConnectionsOpened) }},
	{"netcode_server_connections_timed_out_total", "Connections ended because the client fell silent (ServerStats.ConnectionsTimeout).", prometheus.CounterValue,
		func(s *netcode.ServerStats) float64 { return float64(s.ConnectionsTimeout) }},
	{"netcode_server_draining", "1 once Drain was called: connection requests are denied (ServerStats.Draining).", prometheus.GaugeValue,
		func(s *netcode.ServerStats) float64 { return boolValue(s.Draining) }},
	{"netcode_server_received_packets_total", "Datagrams the server's sockets received, valid or not (ServerStats.PacketsReceived).", prometheus.CounterValue,
		func(s *netcode.ServerStats) float64 { return float64(s.PacketsReceived) }},
	{"netcode_server_received_bytes_total", "Bytes of the datagrams the server's sockets received (ServerStats.BytesReceived).", prometheus.CounterValue,
		func(s *netcode.ServerStats) float64 { return float64(s.BytesReceived) }},
	{"netcode_server_sent_packets_total", "Datagrams the server's socket took to send (ServerStats.PacketsSent).", prometheus.CounterValue,
		func(s *netcode.ServerStats) float64 { return float64(s.PacketsSent) }},
	{"netcode_server_sent_bytes_total", "Bytes of the datagrams the server's socket took to send (ServerStats.BytesSent).", prometheus.CounterValue,
		func(s *netcode.ServerStats) float64 { return float64(s.BytesSent) }},
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// buildInfoName is the metric that says which build serves: always 1,
// with the labels version (netcode.Version) and goversion (the Go release
// the program was built with), as Prometheus's own build_info metrics do.
const buildInfoName = "netcode_build_info"

// collector is the prometheus.Collector of one server's Stats, S, read
// by stats at every scrape, and of buildInfoName. Both dialects' Listeners
// are exported by it (NewCollector, NewCuteCollector).
type collector[S any] struct {
	stats     func() S
	metrics   []metric[S]
	descs     []*prometheus.Desc
	buildInfo *prometheus.Desc
}

// newCollector returns the collector of ms, read from stats.
func newCollector[S any](stats func() S, ms []metric[S], constLabels prometheus.Labels) *collector[S] {
	c := &collector[S]{stats: stats, metrics: ms, descs: make([]*prometheus.Desc, len(ms))}
	for i, m := range ms {
		c.descs[i] = prometheus.NewDesc(m.name, m.help, nil, constLabels)
	}
	c.buildInfo = prometheus.NewDesc(buildInfoName, "The netcode release and Go version the server was built with; always 1.",
		[]string{"version", "goversion"}, constLabels)
	return c
}

// NewCollector returns a collector of src's Stats and of
// netcode_build_info, the metric that says which build serves (always 1,
// with the labels version, netcode.Version, and goversion, the Go release
// the program was built with). constLabels are added to every metric (for
// example {"server": "eu-1"} when one process runs several Listeners); nil
// adds none.
func NewCollector(src StatsSource, constLabels prometheus.Labels) prometheus.Collector {
	return newCollector(src.Stats, metrics, constLabels)
}

// Describe sends the descriptions of every metric.
func (c *collector[S]) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	ch <- c.buildInfo
}

// Collect reads the server's Stats once and sends every metric.
func (c *collector[S]) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	for i, m := range c.metrics {
		ch <- prometheus.MustNewConstMetric(c.descs[i], m.kind, m.value(&st))
	}
	ch <- prometheus.MustNewConstMetric(c.buildInfo, prometheus.GaugeValue, 1, netcode.Version, runtime.Version())
}
