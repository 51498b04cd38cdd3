package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gonetcode/netcode/cute"
	"github.com/gonetcode/netcode/internal/scrape"
)

// CuteStatsSource is what NewCuteCollector reads: a *cute.Listener.
type CuteStatsSource interface {
	Stats() cute.Stats
}

// cuteMetrics lists every field of cute.Stats (a test checks that none is
// missing), under the prefix netcode_cute_server_ and the conventions of
// netcode's series, and netcode_build_info.
var cuteMetrics = []scrape.Metric[cute.Stats]{
	scrape.Gauge("netcode_cute_server_clients", "Clients connected now (cute.Stats.Connected).",
		func(s *cute.Stats) float64 { return float64(s.Connected) }),
	scrape.Gauge("netcode_cute_server_pending", "Handshakes in progress now (cute.Stats.Pending).",
		func(s *cute.Stats) float64 { return float64(s.Pending) }),
	scrape.Gauge("netcode_cute_server_max_clients", "Client slots (cute.Stats.MaxClients).",
		func(s *cute.Stats) float64 { return float64(s.MaxClients) }),
	scrape.Counter("netcode_cute_server_pending_full_total", "Tokens refused because the handshake table was full (cute.Stats.PendingFull).",
		func(s *cute.Stats) float64 { return float64(s.PendingFull) }),
	scrape.Counter("netcode_cute_server_pending_expired_total", "Handshakes dropped by their half-open or handshake timeout or their token's expiry (cute.Stats.PendingExpired).",
		func(s *cute.Stats) float64 { return float64(s.PendingExpired) }),
	scrape.Counter("netcode_cute_server_token_in_use_total", "Tokens refused because the same token is handshaking from another address (cute.Stats.TokenInUse).",
		func(s *cute.Stats) float64 { return float64(s.TokenInUse) }),
	scrape.Counter("netcode_cute_server_token_unanswered_total", "Tokens refused because a handshake with them went unanswered (cute.Stats.TokenUnanswered).",
		func(s *cute.Stats) float64 { return float64(s.TokenUnanswered) }),
	scrape.Counter("netcode_cute_server_token_history_full_total", "Connections refused because the token history was full (cute.Stats.HistoryFull).",
		func(s *cute.Stats) float64 { return float64(s.HistoryFull) }),
	scrape.Counter("netcode_cute_server_token_replayed_total", "Tokens refused because they were consumed already (cute.Stats.TokenReplayed).",
		func(s *cute.Stats) float64 { return float64(s.TokenReplayed) }),
	scrape.Counter("netcode_cute_server_denied_sent_total", "CONNECTION_DENIED packets sent: the server was full or draining (cute.Stats.Denied).",
		func(s *cute.Stats) float64 { return float64(s.Denied) }),
	scrape.Counter("netcode_cute_server_connections_opened_total", "Connections established (cute.Stats.ConnectionsOpened).",
		func(s *cute.Stats) float64 { return float64(s.ConnectionsOpened) }),
	scrape.Counter("netcode_cute_server_connections_timed_out_total", "Connections ended because the client fell silent (cute.Stats.ConnectionsTimedOut).",
		func(s *cute.Stats) float64 { return float64(s.ConnectionsTimedOut) }),
	scrape.Counter("netcode_cute_server_keepalives_dropped_total", "Keepalives not sent because the send queue was full (cute.Stats.KeepAlivesDropped).",
		func(s *cute.Stats) float64 { return float64(s.KeepAlivesDropped) }),
	scrape.Counter("netcode_cute_server_send_errors_total", "Datagrams the socket refused to send (cute.Stats.SendErrors).",
		func(s *cute.Stats) float64 { return float64(s.SendErrors) }),
	scrape.Gauge("netcode_cute_server_draining", "1 once Drain was called: new clients are denied (cute.Stats.Draining).",
		func(s *cute.Stats) float64 { return boolValue(s.Draining) }),
	scrape.Counter("netcode_cute_server_received_packets_total", "Datagrams the server's socket received, valid or not (cute.Stats.PacketsReceived).",
		func(s *cute.Stats) float64 { return float64(s.PacketsReceived) }),
	scrape.Counter("netcode_cute_server_received_bytes_total", "Bytes of the datagrams the server's socket received (cute.Stats.BytesReceived).",
		func(s *cute.Stats) float64 { return float64(s.BytesReceived) }),
	scrape.Counter("netcode_cute_server_sent_packets_total", "Datagrams the server's socket took to send (cute.Stats.PacketsSent).",
		func(s *cute.Stats) float64 { return float64(s.PacketsSent) }),
	scrape.Counter("netcode_cute_server_sent_bytes_total", "Bytes of the datagrams the server's socket took to send (cute.Stats.BytesSent).",
		func(s *cute.Stats) float64 { return float64(s.BytesSent) }),
	buildInfo[cute.Stats](),
}

// NewCuteCollector returns a collector of a Cute server's Stats, read at
// each scrape, under the prefix netcode_cute_server_, and of
// netcode_build_info, as NewCollector does for a netcode server.
// constLabels are added to every metric; nil adds none. A registry that
// also holds a netcode server's collector needs the same label names on
// both, with values that tell them apart (say {"dialect": "netcode"} and
// {"dialect": "cute"}), as for two Listeners: both serve
// netcode_build_info.
func NewCuteCollector(src CuteStatsSource, constLabels prometheus.Labels) prometheus.Collector {
	return scrape.New(src.Stats, cuteMetrics, constLabels)
}
