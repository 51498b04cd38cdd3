package history

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const never = math.MaxUint64

func key(i int) *[16]byte {
	var k [16]byte
	k[0], k[1], k[2] = byte(i), byte(i>>8), byte(i>>16)
	k[15] = 0xee
	return &k
}

// TestTable drives the history through its rules step by step.
func TestTable(t *testing.T) {
	type step struct {
		op     string // "add", "expire"
		i      int    // key
		expire uint64 // add: its expire time; expire: now
		ok     bool   // add: accepted
		len    int    // keys remembered after the step
	}
	tests := []struct {
		name  string
		limit int
		steps []step
	}{
		{"kept until it expires", 4, []step{
			{"add", 1, 105, true, 1},
			{"expire", 0, 104, false, 1},
			{"expire", 0, 105, false, 0},
		}},
		{"full refuses, never evicts", 2, []step{
			{"add", 1, 110, true, 1},
			{"add", 2, 120, true, 2},
			{"add", 3, 101, false, 2},
			{"expire", 0, 109, false, 2},
			{"add", 3, 130, false, 2},
			{"expire", 0, 110, false, 1},
			{"add", 3, 130, true, 2},
		}},
		{"far expiry survives turns of the wheel", 4, []step{
			{"add", 1, 100 + Slots + 5, true, 1},
			{"add", 2, 105, true, 2},
			{"expire", 0, 105, false, 1},
			{"expire", 0, 100 + Slots + 4, false, 1},
			{"expire", 0, 100 + Slots + 5, false, 0},
		}},
		{"a long gap expires everything due", 4, []step{
			{"add", 1, 101, true, 1},
			{"add", 2, 150, true, 2},
			{"add", 3, 100 + 3*Slots, true, 3},
			{"expire", 0, 100 + 2*Slots, false, 1},
			{"expire", 0, 100 + 10*Slots, false, 0},
		}},
		{"never-expiring keys stay", 2, []step{
			{"add", 1, never, true, 1},
			{"add", 2, 101, true, 2},
			{"expire", 0, 1 << 40, false, 1},
		}},
		{"slots are reused", 2, []step{
			{"add", 1, 101, true, 1},
			{"add", 2, 101, true, 2},
			{"expire", 0, 101, false, 0},
			{"add", 3, 102, true, 1},
			{"add", 4, 102, true, 2},
			{"add", 5, 102, false, 2},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New[[16]byte, int](tt.limit, 100, never)
			live := map[int]bool{}
			for n, s := range tt.steps {
				switch s.op {
				case "add":
					e := h.Add(key(s.i), s.expire, s.i)
					require.Equal(t, s.ok, e != nil, "step %d", n)
					if e != nil {
						live[s.i] = true
						assert.Equal(t, s.expire, e.Expires())
					}
				case "expire":
					h.Expire(s.expire)
				}
				require.Equal(t, s.len, h.Len(), "step %d", n)
				assert.LessOrEqual(t, len(h.slab), tt.limit, "the slab never outgrows the limit")
			}
			// What is remembered is found, with its value.
			for i := range live {
				if e := h.Find(key(i)); e != nil {
					assert.Equal(t, i, e.Value)
				}
			}
			h.Clear()
			assert.Zero(t, h.Len())
			assert.Nil(t, h.Find(key(1)))
		})
	}
}

// TestTableSteadyStateAllocs: once the slab has grown, adding and
// expiring allocate nothing.
func TestTableSteadyStateAllocs(t *testing.T) {
	h := New[[16]byte, struct{}](64, 0, never)
	now := uint64(0)
	round := func() {
		now++
		for i := range 64 {
			h.Add(key(int(now)<<8|i), now+1, struct{}{})
		}
		h.Expire(now + 1)
	}
	for range 4 {
		round()
	}
	assert.Zero(t, testing.AllocsPerRun(50, round))
}
