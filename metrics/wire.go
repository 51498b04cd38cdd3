package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gonetcode/netcode/bridge/wire"
	"github.com/gonetcode/netcode/internal/scrape"
)

// WireStatsSource is what NewWireCollector reads: a *wire.Handler.
type WireStatsSource interface {
	Stats() wire.Stats
}

// wireMetrics lists every field of wire.Stats, the refusals in
// netcode_wire_refused_total with a label each (a test checks that none is
// missing).
var wireMetrics = []scrape.Metric[wire.Stats]{
	scrape.Gauge("netcode_wire_sessions", "Wire sessions open now (wire.Stats.Sessions).",
		func(s *wire.Stats) float64 { return float64(s.Sessions) }),
	scrape.Counter("netcode_wire_sessions_opened_total", "Wire sessions admitted (wire.Stats.SessionsOpened).",
		func(s *wire.Stats) float64 { return float64(s.SessionsOpened) }),
	scrape.Counter("netcode_wire_to_target_datagrams_total", "Datagrams the wire sent to its targets (wire.Stats.DatagramsToTarget).",
		func(s *wire.Stats) float64 { return float64(s.DatagramsToTarget) }),
	scrape.Counter("netcode_wire_to_target_bytes_total", "Bytes of the datagrams the wire sent to its targets (wire.Stats.BytesToTarget).",
		func(s *wire.Stats) float64 { return float64(s.BytesToTarget) }),
	scrape.Counter("netcode_wire_to_browser_datagrams_total", "Datagrams the wire sent to browsers (wire.Stats.DatagramsToBrowser).",
		func(s *wire.Stats) float64 { return float64(s.DatagramsToBrowser) }),
	scrape.Counter("netcode_wire_to_browser_bytes_total", "Bytes of the datagrams the wire sent to browsers, framing aside (wire.Stats.BytesToBrowser).",
		func(s *wire.Stats) float64 { return float64(s.BytesToBrowser) }),
	scrape.Counter("netcode_wire_rate_dropped_datagrams_total", "Browsers' datagrams dropped over MaxDatagramsPerSecond (wire.Stats.DroppedRate).",
		func(s *wire.Stats) float64 { return float64(s.DroppedRate) }),
	scrape.Counter("netcode_wire_too_large_dropped_datagrams_total", "Targets' datagrams dropped as larger than their session carries (wire.Stats.DroppedTooLarge).",
		func(s *wire.Stats) float64 { return float64(s.DroppedTooLarge) }),
	scrape.Counter("netcode_wire_idle_timeouts_total", "Wire sessions ended by their idle timeout (wire.Stats.IdleTimeouts).",
		func(s *wire.Stats) float64 { return float64(s.IdleTimeouts) }),
	scrape.Labelled("netcode_wire_refused_total", "Wire sessions refused, by reason (wire.Stats.Refused*).",
		prometheus.CounterValue, []string{"reason"},
		func(s *wire.Stats, send func(float64, ...string)) {
			for _, r := range wireRefusals {
				send(float64(r.value(s)), r.reason)
			}
		}),
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

// NewWireCollector returns a collector of src's Stats (package
// bridge/wire), read at each scrape: sessions, datagrams and bytes each
// way, drops, and refusals by reason in netcode_wire_refused_total
// {reason="origin"|"path"|"not_allowed"|"full"|"source_full"|"closed"}.
// constLabels are added to every metric; nil adds none.
func NewWireCollector(src WireStatsSource, constLabels prometheus.Labels) prometheus.Collector {
	return scrape.New(src.Stats, wireMetrics, constLabels)
}
