package bench

import (
	"os"
	"path/filepath"
	"testing"
)

// A thread's name may hold spaces and parentheses: the fields after it are
// counted from its closing parenthesis.
func TestReadStat(t *testing.T) {
	for _, c := range []struct {
		name, line string
		want       procStat
	}{
		{"a plain name", "4242 (chromium) S 1 4000 4000 0 -1 4194304 10 0 0 0 250 50 0 0 20 0 9 0 100 0 0\n",
			procStat{comm: "chromium", ppid: 1, seconds: 3}},
		{"spaces and parentheses", "4243 (Dedicated (x) 1) R 4242 4001 4001 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 100 0 0\n",
			procStat{comm: "Dedicated (x) 1", ppid: 4242, seconds: 0.1}},
	} {
		path := filepath.Join(t.TempDir(), "stat")
		if err := os.WriteFile(path, []byte(c.line), 0o600); err != nil {
			t.Fatal(err)
		}
		got, ok := readStat(path)
		if !ok || got != c.want {
			t.Errorf("%s: readStat = %+v, %v; want %+v, true", c.name, got, ok, c.want)
		}
	}
	if _, ok := readStat(filepath.Join(t.TempDir(), "gone")); ok {
		t.Error("readStat of a process that ended: ok, want not")
	}
}

func TestMinusKeepsWhatWasSpent(t *testing.T) {
	got := cpuShares{"network": 5, "gpu": 1, "renderer: DedicatedWorker": 2}.minus(cpuShares{"network": 3, "gpu": 1})
	want := cpuShares{"network": 2, "renderer: DedicatedWorker": 2}
	if len(got) != len(want) || got["network"] != 2 || got["renderer: DedicatedWorker"] != 2 {
		t.Errorf("minus = %v, want %v", got, want)
	}
}
