package bench

import (
	"math/bits"
	"time"
)

// histBuckets is the number of buckets of a Histogram: 16 sub-buckets for
// each power of two of a 64-bit value, and 16 exact ones below 16.
const histBuckets = 61 * 16

// Histogram counts durations in log-linear buckets (16 per power of two, so
// a bucket is at most 1/16 = 6.25% wide). Recording does not allocate. It
// is not safe for concurrent use: give each goroutine its own and Merge.
type Histogram struct {
	counts [histBuckets]uint64
	n      uint64
	max    uint64
}

func bucketOf(v uint64) int {
	if v < 16 {
		return int(v)
	}
	e := bits.Len64(v) - 5 // v>>e has 5 bits: a leading 1 and 4 sub-bucket bits
	return (e+1)*16 + int((v>>uint(e))&15)
}

// bucketLow is the smallest value that falls in bucket i.
func bucketLow(i int) uint64 {
	if i < 16 {
		return uint64(i)
	}
	e := i/16 - 1
	return (16 | uint64(i%16)) << uint(e)
}

// Record adds one duration; negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	v := uint64(0)
	if d > 0 {
		v = uint64(d)
	}
	h.counts[bucketOf(v)]++
	h.n++
	if v > h.max {
		h.max = v
	}
}

// Merge adds o's counts to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	if o.max > h.max {
		h.max = o.max
	}
}

// Count is the number of recorded durations.
func (h *Histogram) Count() uint64 { return h.n }

// Max is the largest recorded duration.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Quantile returns the duration below which a fraction q (0..1) of the
// recorded durations fall, as the midpoint of the bucket holding it (within
// about 3% of the true value). It returns 0 for an empty histogram.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	if q < 0 {
		q = 0
	}
	if q > 1 {
		q = 1
	}
	rank := uint64(q*float64(h.n-1)) + 1 // 1-based rank of the sample wanted
	var cum uint64
	for i, c := range h.counts {
		cum += c
		if cum >= rank {
			lo := bucketLow(i)
			hi := lo + 1
			if i+1 < histBuckets {
				hi = bucketLow(i + 1)
			}
			mid := lo + (hi-lo)/2
			if mid > h.max {
				mid = h.max
			}
			return time.Duration(mid)
		}
	}
	return time.Duration(h.max)
}
