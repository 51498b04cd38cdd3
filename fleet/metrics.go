package fleet

import (
	"github.com/prometheus/client_golang/prometheus"
)

// fleetMetric is one exported figure of a Server's or a Chooser's
// counters, read at each scrape as package metrics reads a Listener's.
type fleetMetric[T any] struct {
	name, help string
	kind       prometheus.ValueType
	value      func(*T) float64
}

// serverStats is what a ServerCollector reads at a scrape.
type serverStats struct {
	written, failed, conflicts uint64
	draining                   bool
}

var serverMetrics = []fleetMetric[serverStats]{
	{"netcode_fleet_heartbeats_total", "Heartbeats written to the fleet registry.", prometheus.CounterValue,
		func(s *serverStats) float64 { return float64(s.written) }},
	{"netcode_fleet_heartbeat_failures_total", "Heartbeats that failed (registry unreachable); the server serves on and retries with backoff.", prometheus.CounterValue,
		func(s *serverStats) float64 { return float64(s.failed) }},
	{"netcode_fleet_heartbeat_conflicts_total", "Heartbeats that found the server's entry written by another registration of its id (Server.Conflicts): two writers claim the id.", prometheus.CounterValue,
		func(s *serverStats) float64 { return float64(s.conflicts) }},
	{"netcode_fleet_draining", "1 once the server is marked draining in the registry.", prometheus.GaugeValue,
		func(s *serverStats) float64 {
			if s.draining {
				return 1
			}
			return 0
		}},
}

var chooserMetrics = []fleetMetric[ChooserStats]{
	{"netcode_fleet_chooser_servers", "Live servers in the Chooser's regions as last read (ChooserStats.Servers).", prometheus.GaugeValue,
		func(s *ChooserStats) float64 { return float64(s.Servers) }},
	{"netcode_fleet_chooser_reads_total", "Region reads from the registry (ChooserStats.Reads).", prometheus.CounterValue,
		func(s *ChooserStats) float64 { return float64(s.Reads) }},
	{"netcode_fleet_chooser_read_errors_total", "Region reads that failed (ChooserStats.ReadErrors).", prometheus.CounterValue,
		func(s *ChooserStats) float64 { return float64(s.ReadErrors) }},
	{"netcode_fleet_chooser_events_total", "Drain and departure messages received (ChooserStats.Events).", prometheus.CounterValue,
		func(s *ChooserStats) float64 { return float64(s.Events) }},
	{"netcode_fleet_chooser_choices_total", "Token requests answered with servers (ChooserStats.Choices).", prometheus.CounterValue,
		func(s *ChooserStats) float64 { return float64(s.Choices) }},
	{"netcode_fleet_chooser_no_servers_total", "Token requests that found no server, answered 503 (ChooserStats.NoServers).", prometheus.CounterValue,
		func(s *ChooserStats) float64 { return float64(s.NoServers) }},
	{"netcode_fleet_chooser_refused_entries_total", "Registry entries skipped as malformed or outside the protocol's limits, counted at each read (ChooserStats.Refused).", prometheus.CounterValue,
		func(s *ChooserStats) float64 { return float64(s.Refused) }},
	{"netcode_fleet_chooser_conflicts_total", "Registry entries claiming another server's id, and ids switching back to an earlier registration (ChooserStats.Conflicts).", prometheus.CounterValue,
		func(s *ChooserStats) float64 { return float64(s.Conflicts) }},
	{"netcode_fleet_chooser_registry_age_seconds", "Time since the oldest region was last read successfully (ChooserStats.Stale); past the grace period, tokens are refused.", prometheus.GaugeValue,
		func(s *ChooserStats) float64 { return s.Stale.Seconds() }},
}

// collector is a prometheus.Collector of a table of metrics over one
// snapshot read per scrape.
type collector[T any] struct {
	read    func() T
	metrics []fleetMetric[T]
	descs   []*prometheus.Desc
}

func newCollector[T any](read func() T, metrics []fleetMetric[T], constLabels prometheus.Labels) *collector[T] {
	c := &collector[T]{read: read, metrics: metrics, descs: make([]*prometheus.Desc, len(metrics))}
	for i, m := range metrics {
		c.descs[i] = prometheus.NewDesc(m.name, m.help, nil, constLabels)
	}
	return c
}

// Describe sends the descriptions of every metric.
func (c *collector[T]) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect reads the counters once and sends every metric.
func (c *collector[T]) Collect(ch chan<- prometheus.Metric) {
	st := c.read()
	for i, m := range c.metrics {
		ch <- prometheus.MustNewConstMetric(c.descs[i], m.kind, m.value(&st))
	}
}

// NewServerCollector returns a Prometheus collector of a registration's
// heartbeats (netcode_fleet_heartbeats_total, ..._failures_total) and
// draining mark; constLabels are added to every metric (nil adds none).
func NewServerCollector(s *Server, constLabels prometheus.Labels) prometheus.Collector {
	return newCollector(func() serverStats {
		w, f := s.Heartbeats()
		return serverStats{written: w, failed: f, conflicts: s.Conflicts(), draining: s.draining.Load()}
	}, serverMetrics, constLabels)
}

// NewChooserCollector returns a Prometheus collector of a Chooser's Stats
// (netcode_fleet_chooser_*); constLabels are added to every metric (nil
// adds none).
func NewChooserCollector(ch *Chooser, constLabels prometheus.Labels) prometheus.Collector {
	return newCollector(ch.Stats, chooserMetrics, constLabels)
}
