package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestWriteRandom(t *testing.T) {
	dir := t.TempDir()
	// Several chunks and a tail, so that more than one worker writes and a
	// gap or an overlap between chunks shows.
	const n = 3*randomChunk + 17
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
	for i, f := range files {
		var chunks [][]byte
		for off := 0; off < n; off += randomChunk {
			chunks = append(chunks, f[off:min(off+randomChunk, n)])
		}
		for j, c := range chunks {
			if !slices.ContainsFunc(c, func(b byte) bool { return b != 0 }) {
				t.Errorf("file %d: chunk %d (%d bytes) is all zeros: not written", i, j, len(c))
			}
			for k := range j {
				if bytes.Equal(c, chunks[k][:len(c)]) {
					t.Errorf("file %d: chunk %d repeats chunk %d", i, j, k)
				}
			}
		}
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
