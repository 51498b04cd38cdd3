// Package scrape is the one Prometheus collector of the module's metrics
// (package metrics: a Listener's and a wire's Stats; package fleet: a
// Server's heartbeats and a Chooser's Stats): a table of metrics over one
// snapshot of counters, read once at each scrape. It keeps nothing between
// scrapes and costs what it reads nothing in between.
package scrape

import "github.com/prometheus/client_golang/prometheus"

// Metric is one metric of a snapshot of type S: a counter or a gauge
// without labels, or a metric with variable labels (Labelled).
type Metric[S any] struct {
	name, help string
	kind       prometheus.ValueType
	labels     []string
	series     func(s *S, send func(value float64, labelValues ...string))
}

// Counter returns the counter name, whose value in a snapshot is value's.
func Counter[S any](name, help string, value func(*S) float64) Metric[S] {
	return single(name, help, prometheus.CounterValue, value)
}

// Gauge returns the gauge name, whose value in a snapshot is value's.
func Gauge[S any](name, help string, value func(*S) float64) Metric[S] {
	return single(name, help, prometheus.GaugeValue, value)
}

func single[S any](name, help string, kind prometheus.ValueType, value func(*S) float64) Metric[S] {
	return Metric[S]{name: name, help: help, kind: kind,
		series: func(s *S, send func(float64, ...string)) { send(value(s)) }}
}

// Labelled returns the metric name with the variable labels: at each
// scrape, series sends each of its series, a value with the values of
// labels.
func Labelled[S any](name, help string, kind prometheus.ValueType, labels []string, series func(s *S, send func(value float64, labelValues ...string))) Metric[S] {
	return Metric[S]{name: name, help: help, kind: kind, labels: labels, series: series}
}

// collector is the prometheus.Collector of a table of metrics.
type collector[S any] struct {
	read    func() S
	metrics []Metric[S]
	descs   []*prometheus.Desc
}

// New returns a collector of metrics, over the snapshot read returns once
// at each scrape. constLabels are added to every metric; nil adds none.
func New[S any](read func() S, metrics []Metric[S], constLabels prometheus.Labels) prometheus.Collector {
	c := &collector[S]{read: read, metrics: metrics, descs: make([]*prometheus.Desc, len(metrics))}
	for i, m := range metrics {
		c.descs[i] = prometheus.NewDesc(m.name, m.help, m.labels, constLabels)
	}
	return c
}

// Describe sends the descriptions of every metric.
func (c *collector[S]) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect reads a snapshot and sends every metric.
func (c *collector[S]) Collect(ch chan<- prometheus.Metric) {
	st := c.read()
	for i, m := range c.metrics {
		m.series(&st, func(v float64, labelValues ...string) {
			ch <- prometheus.MustNewConstMetric(c.descs[i], m.kind, v, labelValues...)
		})
	}
}
