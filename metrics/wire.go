package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gonetcode/netcode/bridge/wire"
)

// WireStatsSource is what NewWireCollector reads: a *wire.Handler.
type WireStatsSource interface {
	Stats() wire.Stats
}

// wireMetric is one exported figure of wire.Stats.
type wireMetric struct {
	name, help string
	kind       prometheus.ValueType
	value      func(*wire.Stats) float64
}

// wireMetrics lists every field of wire.Stats but the refusals, which
// netcode_wire_refused_total exports with a label each (a test checks that
// none is missing).
var wireMetrics = []wireMetric{
	{"netcode_wire_sessions", "Wire sessions open now (wire.Stats.Sessions).", prometheus.GaugeValue,
		func(s *wire.Stats) float64 { return float64(s.Sessions) }},
	{"netcode_wire_sessions_opened_total", "Wire sessions admitted (wire.Stats.SessionsOpened).", prometheus.CounterValue,
		func(s *wire.Stats) float64 { return float64(s.SessionsOpened) }},
	{"netcode_wire_to_target_datagrams_total", "Datagrams the wire sent to its targets (wire.Stats.DatagramsToTarget).", prometheus.CounterValue,
		func(s *wire.Stats) float64 { return float64(s.DatagramsToTarget) }},
	{"netcode_wire_to_target_bytes_total", "Bytes of the datagrams the wire sent to its targets (wire.Stats.BytesToTarget).", prometheus.CounterValue,
		func(s *wire.Stats) float64 { return float64(s.BytesToTarget) }},
	{"netcode_wire_to_browser_datagrams_total", "Datagrams the wire sent to browsers (wire.Stats.DatagramsToBrowser).", prometheus.CounterValue,
		func(s *wire.Stats) float64 { return float64(s.DatagramsToBrowser) }},
	{"netcode_wire_to_browser_bytes_total", "Bytes of the datagrams the wire sent to browsers, framing aside (wire.Stats.BytesToBrowser).", prometheus.CounterValue,
		func(s *wire.Stats) float64 { return float64(s.BytesToBrowser) }},
	{"netcode_wire_rate_dropped_datagrams_total", "Browsers' datagrams dropped over MaxDatagramsPerSecond (wire.Stats.DroppedRate).", prometheus.CounterValue,
		func(s *wire.Stats) float64 { return float64(s.DroppedRate) }},
	{"netcode_wire_too_large_dropped_datagrams_total", "Targets' datagrams dropped as larger than their session carries (wire.Stats.DroppedTooLarge).", prometheus.CounterValue,
		func(s *wire.Stats) float64 { return float64(s.DroppedTooLarge) }},
	{"netcode_wire_idle_timeouts_total", "Wire sessions ended by their idle timeout (wire.Stats.IdleTimeouts).", prometheus.CounterValue,
		func(s *wire.Stats) float64 { return float64(s.IdleTimeouts) }},
}

// wireRefusals are the values of netcode_wire_refused_total's label
// reason, with the wire.Stats field of each.
var wireRefusals = []struct {
	reason string
	value  func(*wire.Stats) uint64
}{
	{"origin", func(s *wire.Stats) uint64 { return s.RefusedOrigin }},
	{"path", func(s *wire.Stats) uint64 { return s.RefusedPath }},
	{"not_allowed", func(s *wire.Stats) uint64 { return s.RefusedNotAllowed }},
	{"full", func(s *wire.Stats) uint64 { return s.RefusedFull }},
	{"source_full", func(s *wire.Stats) uint64 { return s.RefusedSourceFull }},
	{"closed", func(s *wire.Stats) uint64 { return s.RefusedClosed }},
}

// wireCollector is the prometheus.Collector of one wire's Stats.
type wireCollector struct {
	src     WireStatsSource
	descs   []*prometheus.Desc
	refused *prometheus.Desc
}

// NewWireCollector returns a collector of src's Stats (package
// bridge/wire), read at each scrape: sessions, datagrams and bytes each
// way, drops, and refusals by reason in netcode_wire_refused_total
// {reason="origin"|"path"|"not_allowed"|"full"|"source_full"|"closed"}.
// constLabels are added to every metric; nil adds none.
func NewWireCollector(src WireStatsSource, constLabels prometheus.Labels) prometheus.Collector {
	c := &wireCollector{src: src, descs: make([]*prometheus.Desc, len(wireMetrics))}
	for i, m := range wireMetrics {
		c.descs[i] = prometheus.NewDesc(m.name, m.help, nil, constLabels)
	}
	c.refused = prometheus.NewDesc("netcode_wire_refused_total",
		"Wire sessions refused, by reason (wire.Stats.Refused*).", []string{"reason"}, constLabels)
	return c
}

// Describe sends the descriptions of every metric.
func (c *wireCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	ch <- c.refused
}

// Collect reads the wire's Stats once and sends every metric.
func (c *wireCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Stats()
	for i, m := range wireMetrics {
		ch <- prometheus.MustNewConstMetric(c.descs[i], m.kind, m.value(&st))
	}
	for _, r := range wireRefusals {
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(r.value(&st)), r.reason)
	}
}
