package metrics_test

import (
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/bridge/wire"
	"github.com/gonetcode/netcode/metrics"
)

type fixedWire struct{}

// Stats gives every field a value of its own: 1, 2, 3...
func (fixedWire) Stats() wire.Stats {
	var s wire.Stats
	v := reflect.ValueOf(&s).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if f.CanInt() {
			f.SetInt(int64(i + 1))
		} else {
			f.SetUint(uint64(i + 1))
		}
	}
	return s
}

// TestWireEveryField: every field of wire.Stats is exported, with its
// own value (the refusals as netcode_wire_refused_total{reason}), and
// the metrics pass Prometheus's linter.
func TestWireEveryField(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(metrics.NewWireCollector(fixedWire{}, nil)))
	families, err := reg.Gather()
	require.NoError(t, err)
	seen := map[float64]bool{}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetGauge() != nil:
				seen[m.GetGauge().GetValue()] = true
			case m.GetCounter() != nil:
				seen[m.GetCounter().GetValue()] = true
			}
		}
	}
	n := reflect.TypeFor[wire.Stats]().NumField()
	for i := 1; i <= n; i++ {
		assert.True(t, seen[float64(i)], "field %s is not exported", reflect.TypeFor[wire.Stats]().Field(i-1).Name)
	}
	problems, err := promlint.NewWithMetricFamilies(families).Lint()
	require.NoError(t, err)
	assert.Empty(t, problems)
}
