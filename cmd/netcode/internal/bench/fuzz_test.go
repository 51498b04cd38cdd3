package bench

import (
	"bytes"
	"compress/gzip"
	"testing"
)

// FuzzPBFields checks that the profile decoder never panics on any input,
// gzipped or not.
func FuzzPBFields(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x02, 0x08, 0x01})             // sample_type {type: 1}
	f.Add([]byte{0x12, 0x04, 0x12, 0x02, 0x01, 0x02}) // sample {value: packed [1 2]}
	f.Add([]byte{0x32, 0x03, 'c', 'p', 'u'})          // string_table
	f.Add([]byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = pbFields(b, func(int, int, uint64, []byte) error { return nil })
		var gz bytes.Buffer
		w := gzip.NewWriter(&gz)
		w.Write(b)
		w.Close()
		_, _ = cpuBySide(gz.Bytes(), LabelKey)
	})
}
