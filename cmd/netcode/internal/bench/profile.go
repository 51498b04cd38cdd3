package bench

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
)

// LabelKey is the pprof label that tells which side of the benchmark a
// goroutine works for; its values are SideServer and SideClient.
// Goroutines inherit their creator's labels, so the goroutines a Listener
// or a Dial start carry the label of the code that called them.
const LabelKey = "bench"

// Label values.
const (
	SideServer = "server"
	SideClient = "client"
)

// cpuBySide decodes a CPU profile written by runtime/pprof (gzipped
// protobuf) and sums the CPU nanoseconds of its samples by the value of the
// label key; samples without the label are summed under "".
func cpuBySide(gz []byte, key string) (map[string]int64, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(io.LimitReader(zr, 256<<20))
	if err != nil {
		return nil, err
	}
	type sample struct {
		values []int64
		labels [][2]int64 // key, str (string table indexes)
	}
	var (
		strs       []string
		samples    []sample
		valueTypes [][2]int64 // type, unit
	)
	err = pbFields(raw, func(field int, wire int, v uint64, b []byte) error {
		switch {
		case field == 1 && wire == 2: // sample_type
			var vt [2]int64
			err := pbFields(b, func(f, w int, v uint64, _ []byte) error {
				if w == 0 && (f == 1 || f == 2) {
					vt[f-1] = int64(v)
				}
				return nil
			})
			valueTypes = append(valueTypes, vt)
			return err
		case field == 2 && wire == 2: // sample
			var s sample
			err := pbFields(b, func(f, w int, v uint64, b []byte) error {
				switch {
				case f == 2 && w == 0:
					s.values = append(s.values, int64(v))
				case f == 2 && w == 2: // packed
					for len(b) > 0 {
						x, n := binary.Uvarint(b)
						if n <= 0 {
							return errors.New("bad varint")
						}
						s.values = append(s.values, int64(x))
						b = b[n:]
					}
				case f == 3 && w == 2:
					var l [2]int64
					err := pbFields(b, func(f, w int, v uint64, _ []byte) error {
						if w == 0 && (f == 1 || f == 2) {
							l[f-1] = int64(v)
						}
						return nil
					})
					if err != nil {
						return err
					}
					s.labels = append(s.labels, l)
				}
				return nil
			})
			samples = append(samples, s)
			return err
		case field == 6 && wire == 2: // string_table
			strs = append(strs, string(b))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	str := func(i int64) string {
		if i < 0 || i >= int64(len(strs)) {
			return ""
		}
		return strs[i]
	}
	// The CPU time is the value whose type is "cpu"; runtime/pprof writes
	// [samples/count, cpu/nanoseconds].
	col := -1
	for i, vt := range valueTypes {
		if str(vt[0]) == "cpu" {
			col = i
		}
	}
	if col < 0 {
		return nil, errors.New("not a CPU profile")
	}
	out := map[string]int64{}
	for _, s := range samples {
		if col >= len(s.values) {
			continue
		}
		side := ""
		for _, l := range s.labels {
			if str(l[0]) == key {
				side = str(l[1])
			}
		}
		out[side] += s.values[col]
	}
	return out, nil
}

// pbFields calls fn for each field of the protobuf message b: for varints
// and fixed-size fields v holds the value, for length-delimited ones b.
func pbFields(b []byte, fn func(field, wire int, v uint64, b []byte) error) error {
	for len(b) > 0 {
		tag, n := binary.Uvarint(b)
		if n <= 0 {
			return errors.New("pprof: bad tag")
		}
		b = b[n:]
		field, wire := int(tag>>3), int(tag&7)
		switch wire {
		case 0:
			v, n := binary.Uvarint(b)
			if n <= 0 {
				return errors.New("pprof: bad varint")
			}
			b = b[n:]
			if err := fn(field, wire, v, nil); err != nil {
				return err
			}
		case 1:
			if len(b) < 8 {
				return errors.New("pprof: short fixed64")
			}
			if err := fn(field, wire, binary.LittleEndian.Uint64(b), nil); err != nil {
				return err
			}
			b = b[8:]
		case 2:
			l, n := binary.Uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return errors.New("pprof: bad length")
			}
			b = b[n:]
			if err := fn(field, wire, 0, b[:l]); err != nil {
				return err
			}
			b = b[l:]
		case 5:
			if len(b) < 4 {
				return errors.New("pprof: short fixed32")
			}
			if err := fn(field, wire, uint64(binary.LittleEndian.Uint32(b)), nil); err != nil {
				return err
			}
			b = b[4:]
		default:
			return errors.New("pprof: unknown wire type")
		}
	}
	return nil
}
