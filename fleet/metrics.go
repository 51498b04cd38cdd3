package fleet

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gonetcode/netcode/internal/scrape"
)

// serverStats is what a ServerCollector reads at a scrape.
type serverStats struct {
	written, failed, conflicts uint64
	draining                   bool
}

var serverMetrics = []scrape.Metric[serverStats]{
	scrape.Counter("netcode_fleet_heartbeats_total", "Heartbeats written to the fleet registry.",
		func(s *serverStats) float64 { return float64(s.written) }),
	scrape.Counter("netcode_fleet_heartbeat_failures_total", "Heartbeats that failed (registry unreachable); the server serves on and retries with backoff.",
		func(s *serverStats) float64 { return float64(s.failed) }),
	scrape.Counter("netcode_fleet_heartbeat_conflicts_total", "Heartbeats that found the server's entry written by another registration of its id (Server.Conflicts): two writers claim the id.",
		func(s *serverStats) float64 { return float64(s.conflicts) }),
	scrape.Gauge("netcode_fleet_draining", "1 once the server is marked draining in the registry.",
		func(s *serverStats) float64 {
			if s.draining {
				return 1
			}
			return 0
		}),
}

var chooserMetrics = []scrape.Metric[ChooserStats]{
	scrape.Gauge("netcode_fleet_chooser_servers", "Live servers in the Chooser's regions as last read (ChooserStats.Servers).",
		func(s *ChooserStats) float64 { return float64(s.Servers) }),
	scrape.Counter("netcode_fleet_chooser_reads_total", "Region reads from the registry (ChooserStats.Reads).",
		func(s *ChooserStats) float64 { return float64(s.Reads) }),
	scrape.Counter("netcode_fleet_chooser_read_errors_total", "Region reads that failed (ChooserStats.ReadErrors).",
		func(s *ChooserStats) float64 { return float64(s.ReadErrors) }),
	scrape.Counter("netcode_fleet_chooser_events_total", "Drain and departure messages received (ChooserStats.Events).",
		func(s *ChooserStats) float64 { return float64(s.Events) }),
	scrape.Counter("netcode_fleet_chooser_choices_total", "Token requests answered with servers (ChooserStats.Choices).",
		func(s *ChooserStats) float64 { return float64(s.Choices) }),
	scrape.Counter("netcode_fleet_chooser_no_servers_total", "Token requests that found no server, answered 503 (ChooserStats.NoServers).",
		func(s *ChooserStats) float64 { return float64(s.NoServers) }),
	scrape.Counter("netcode_fleet_chooser_refused_entries_total", "Registry entries skipped as malformed or outside the protocol's limits, counted at each read (ChooserStats.Refused).",
		func(s *ChooserStats) float64 { return float64(s.Refused) }),
	scrape.Counter("netcode_fleet_chooser_conflicts_total", "Registry entries claiming another server's id, and ids switching back to an earlier registration (ChooserStats.Conflicts).",
		func(s *ChooserStats) float64 { return float64(s.Conflicts) }),
	scrape.Gauge("netcode_fleet_chooser_registry_age_seconds", "Time since the oldest region was last read successfully (ChooserStats.Stale); past the grace period, tokens are refused.",
		func(s *ChooserStats) float64 { return s.Stale.Seconds() }),
}

// NewServerCollector returns a Prometheus collector of a registration's
// heartbeats (netcode_fleet_heartbeats_total, ..._failures_total) and
// draining mark; constLabels are added to every metric (nil adds none).
func NewServerCollector(s *Server, constLabels prometheus.Labels) prometheus.Collector {
	return scrape.New(func() serverStats {
		w, f := s.Heartbeats()
		return serverStats{written: w, failed: f, conflicts: s.Conflicts(), draining: s.draining.Load()}
	}, serverMetrics, constLabels)
}

// NewChooserCollector returns a Prometheus collector of a Chooser's Stats
// (netcode_fleet_chooser_*); constLabels are added to every metric (nil
// adds none).
func NewChooserCollector(ch *Chooser, constLabels prometheus.Labels) prometheus.Collector {
	return scrape.New(ch.Stats, chooserMetrics, constLabels)
}
