package testenv

import (
	"debug/elf"
	"path/filepath"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

// Bootstraps lays the functions out as make build does, each a Linux
// binary for the architecture asked for, and builds each architecture
// once however many tests ask.
func TestBootstraps(t *testing.T) {
	dir := Bootstraps(t, "arm64")
	if again := Bootstraps(t, "arm64"); again != dir {
		t.Errorf("asked twice, the bootstraps are in %s and %s: built twice", dir, again)
	}
	for _, fn := range []string{"PresignFunction", "FinalizeFunction", "EventsFunction"} {
		f, err := elf.Open(filepath.Join(dir, fn, "bootstrap"))
		if err != nil {
			t.Errorf("%s: %v", fn, err)
			continue
		}
		if f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX || f.Machine != elf.EM_AARCH64 || f.Type != elf.ET_EXEC {
			t.Errorf("%s/bootstrap: %v %v %v, want a linux/arm64 executable", fn, f.OSABI, f.Machine, f.Type)
		}
		f.Close()
	}
}
