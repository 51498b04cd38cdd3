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
	"github.com/gonetcode/netcode/internal/scrape"
)

// StatsSource is what NewCollector reads: a *netcode.Listener.
type StatsSource interface {
	Stats() netcode.ServerStats
}

// metrics lists every field of netcode.ServerStats (a test checks that none
// is missing), named by Prometheus conventions, and netcode_build_info.
var metrics = []scrape.Metric[netcode.ServerStats]{
	scrape.Gauge("netcode_server_clients", "Clients connected now (ServerStats.Connected).",
		func(s *netcode.ServerStats) float64 { return float64(s.Connected) }),
	scrape.Gauge("netcode_server_mappings", "Encryption mappings held now: clients connected or in the handshake (ServerStats.Mappings).",
		func(s *netcode.ServerStats) float64 { return float64(s.Mappings) }),
	scrape.Gauge("netcode_server_mappings_limit", "Most encryption mappings held at once (ServerStats.MappingsLimit).",
		func(s *netcode.ServerStats) float64 { return float64(s.MappingsLimit) }),
	scrape.Gauge("netcode_server_token_history", "Connect tokens remembered now, each until it expires (ServerStats.History).",
		func(s *netcode.ServerStats) float64 { return float64(s.History) }),
	scrape.Gauge("netcode_server_token_history_limit", "Most connect tokens remembered at once (ServerStats.HistoryLimit).",
		func(s *netcode.ServerStats) float64 { return float64(s.HistoryLimit) }),
	scrape.Counter("netcode_server_token_history_full_total", "Connection requests with a new token refused because the token history was full (ServerStats.HistoryFull).",
		func(s *netcode.ServerStats) float64 { return float64(s.HistoryFull) }),
	scrape.Counter("netcode_server_mappings_full_total", "Connection requests that found the encryption mapping table full and dropped the oldest handshake in progress (ServerStats.MappingsFull).",
		func(s *netcode.ServerStats) float64 { return float64(s.MappingsFull) }),
	scrape.Counter("netcode_server_payloads_dropped_total", "Received payloads dropped because their connection's read queue was full (ServerStats.PayloadsDropped).",
		func(s *netcode.ServerStats) float64 { return float64(s.PayloadsDropped) }),
	scrape.Counter("netcode_server_keepalives_dropped_total", "Keep-alives not sent because the send queue was full (ServerStats.KeepAlivesDropped).",
		func(s *netcode.ServerStats) float64 { return float64(s.KeepAlivesDropped) }),
	scrape.Counter("netcode_server_send_errors_total", "Datagrams the socket refused to send (ServerStats.SendErrors).",
		func(s *netcode.ServerStats) float64 { return float64(s.SendErrors) }),
	scrape.Counter("netcode_server_ignored_packets_total", "Datagrams dropped as malformed, unauthenticated or out of place (ServerStats.Ignored).",
		func(s *netcode.ServerStats) float64 { return float64(s.Ignored) }),
	scrape.Counter("netcode_server_replayed_packets_total", "Datagrams dropped by replay protection (ServerStats.Replayed).",
		func(s *netcode.ServerStats) float64 { return float64(s.Replayed) }),
	scrape.Counter("netcode_server_challenges_sent_total", "Connection challenges sent: valid connection requests (ServerStats.ChallengesSent).",
		func(s *netcode.ServerStats) float64 { return float64(s.ChallengesSent) }),
	scrape.Counter("netcode_server_denied_sent_total", "Connection-denied packets sent: the server was full or draining (ServerStats.DeniedSent).",
		func(s *netcode.ServerStats) float64 { return float64(s.DeniedSent) }),
	scrape.Counter("netcode_server_token_reuse_refused_total", "Connection requests refused because their token was used already (ServerStats.TokenReuseRefused).",
		func(s *netcode.ServerStats) float64 { return float64(s.TokenReuseRefused) }),
	scrape.Counter("netcode_server_address_not_in_token_total", "Connection requests whose token names other servers (ServerStats.AddressNotInToken).",
		func(s *netcode.ServerStats) float64 { return float64(s.AddressNotInToken) }),
	scrape.Counter("netcode_server_connections_opened_total", "Connections established (ServerStats.ConnectionsOpened).",
		func(s *netcode.ServerStats) float64 { return float64(s.ConnectionsOpened) }),
	scrape.Counter("netcode_server_connections_timed_out_total", "Connections ended because the client fell silent (ServerStats.ConnectionsTimeout).",
		func(s *netcode.ServerStats) float64 { return float64(s.ConnectionsTimeout) }),
	scrape.Gauge("netcode_server_draining", "1 once Drain was called: connection requests are denied (ServerStats.Draining).",
		func(s *netcode.ServerStats) float64 { return boolValue(s.Draining) }),
	scrape.Counter("netcode_server_received_packets_total", "Datagrams the server's sockets received, valid or not (ServerStats.PacketsReceived).",
		func(s *netcode.ServerStats) float64 { return float64(s.PacketsReceived) }),
	scrape.Counter("netcode_server_received_bytes_total", "Bytes of the datagrams the server's sockets received (ServerStats.BytesReceived).",
		func(s *netcode.ServerStats) float64 { return float64(s.BytesReceived) }),
	scrape.Counter("netcode_server_sent_packets_total", "Datagrams the server's socket took to send (ServerStats.PacketsSent).",
		func(s *netcode.ServerStats) float64 { return float64(s.PacketsSent) }),
	scrape.Counter("netcode_server_sent_bytes_total", "Bytes of the datagrams the server's socket took to send (ServerStats.BytesSent).",
		func(s *netcode.ServerStats) float64 { return float64(s.BytesSent) }),
	buildInfo[netcode.ServerStats](),
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// buildInfo is the metric that says which build serves, in a dialect's
// table (S: netcode.ServerStats, cute.Stats): always 1, with the labels
// version (netcode.Version) and goversion (the Go release the program was
// built with), as Prometheus's own build_info metrics do.
func buildInfo[S any]() scrape.Metric[S] {
	return scrape.Labelled("netcode_build_info", "The netcode release and Go version the server was built with; always 1.",
		prometheus.GaugeValue, []string{"version", "goversion"},
		func(_ *S, send func(float64, ...string)) {
			send(1, netcode.Version, runtime.Version())
		})
}

// NewCollector returns a collector of src's Stats and of
// netcode_build_info, the metric that says which build serves (always 1,
// with the labels version, netcode.Version, and goversion, the Go release
// the program was built with). constLabels are added to every metric (for
// example {"server": "eu-1"} when one process runs several Listeners); nil
// adds none.
func NewCollector(src StatsSource, constLabels prometheus.Labels) prometheus.Collector {
	return scrape.New(src.Stats, metrics, constLabels)
}
