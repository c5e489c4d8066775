package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteRandom(t *testing.T) {
	dir := t.TempDir()
	const n = 3<<20 + 17
	var files [2][]byte
	for i := range files {
		path := filepath.Join(dir, "f"+string(rune('a'+i)))
		if err := WriteRandom(path, n); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != n {
			t.Fatalf("%s: %d bytes, want %d", path, len(b), n)
		}
		files[i] = b
	}
	if bytes.Equal(files[0][:1<<20], files[1][:1<<20]) {
		t.Error("two files start with the same MiB: the seed is not fresh")
	}
	if bytes.Equal(files[0][:1<<20], files[0][1<<20:2<<20]) {
		t.Error("a file repeats its first MiB")
	}
}

func TestLargeFileWay(t *testing.T) {
	lf := LargeFile{Ways: []LargeFileWay{{Name: WayParts, Seconds: []float64{1}}, {Name: WayTusd, Note: "no node"}}}
	if _, ok := lf.Way(WayParts); !ok {
		t.Error("parts ran")
	}
	if w, ok := lf.Way(WayTusd); ok || w.Note != "no node" {
		t.Errorf("tusd: %+v, %v; want not run, with its note", w, ok)
	}
	if _, ok := lf.Way(WayProbe); ok {
		t.Error("the probe is absent")
	}
}
