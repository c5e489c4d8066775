package bench

import (
	"slices"
	"testing"
	"time"
)

func coldStartOf(median time.Duration) ColdStart {
	return ColdStart{Runs: []time.Duration{median}, Median: median}
}

// A function is judged against the baseline of its own round, so a round
// on a busy machine (slow baseline, slow function) is not counted as the
// function's cost; the figure is the median of the rounds, with their
// spread.
func TestColdStartOverTheBaselineOfItsRound(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name                  string
		baseline, fn          []time.Duration
		over                  []time.Duration
		median, lowest, worst time.Duration
	}{
		{"steady", []time.Duration{40 * ms, 40 * ms, 40 * ms}, []time.Duration{46 * ms, 47 * ms, 45 * ms},
			[]time.Duration{6 * ms, 7 * ms, 5 * ms}, 6 * ms, 5 * ms, 7 * ms},
		{"one busy round", []time.Duration{40 * ms, 90 * ms, 41 * ms}, []time.Duration{46 * ms, 99 * ms, 48 * ms},
			[]time.Duration{6 * ms, 9 * ms, 7 * ms}, 7 * ms, 6 * ms, 9 * ms},
		{"faster than the baseline", []time.Duration{40 * ms}, []time.Duration{38 * ms},
			[]time.Duration{-2 * ms}, -2 * ms, -2 * ms, -2 * ms},
	} {
		t.Run(c.name, func(t *testing.T) {
			var base []ColdStart
			f := FunctionColdStart{Function: "presign"}
			for i := range c.baseline {
				base = append(base, coldStartOf(c.baseline[i]))
				f.Rounds = append(f.Rounds, coldStartOf(c.fn[i]))
			}
			f.judge(base)
			if !slices.Equal(f.OverBaseline, c.over) || f.MedianOver != c.median || f.MinOver != c.lowest || f.MaxOver != c.worst {
				t.Errorf("over baseline %v, median %v, spread %v to %v; want %v, median %v, spread %v to %v",
					f.OverBaseline, f.MedianOver, f.MinOver, f.MaxOver, c.over, c.median, c.lowest, c.worst)
			}
		})
	}
}

// Pooled keeps every round's runs and the memory read in the last round.
func TestPooledColdStart(t *testing.T) {
	ms := time.Millisecond
	got := Pooled([]ColdStart{
		{Runs: []time.Duration{5 * ms, 9 * ms}, RSSKiB: 100, Invocations: 1},
		{Runs: []time.Duration{7 * ms}, RSSKiB: 300, Invocations: 1001},
	})
	if want := []time.Duration{5 * ms, 9 * ms, 7 * ms}; !slices.Equal(got.Runs, want) || got.Median != 7*ms || got.RSSKiB != 300 || got.Invocations != 1001 {
		t.Errorf("Pooled = %+v; want runs %v, median 7ms, RSS 300 KiB after 1001 invocations", got, want)
	}
}
