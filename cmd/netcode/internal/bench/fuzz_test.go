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

// FuzzParseProcStat checks that the /proc/<pid>/stat and /proc/stat
// parsers never panic and never return a negative CPU time.
func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("4242 (netcode) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 130 0 0 20 0 9 0 100 0 0\n"))
	f.Add([]byte("7 (a) b (c)) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0"))
	f.Add([]byte("1 (x"))
	f.Add([]byte("cpu  100 20 30 5000 7 1 2 3 0 0\ncpu0 50 10 15 2500 3 1 1 1 0 0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := parseProcStat(b)
		if err == nil && d < 0 {
			t.Fatalf("negative CPU time %v", d)
		}
		d, err = parseMachineStat(b)
		if err == nil && d < 0 {
			t.Fatalf("negative machine CPU time %v", d)
		}
	})
}
