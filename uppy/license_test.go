package uppy_test

import (
	"bytes"
	"os"
	"testing"
)

// The package ships its own LICENSE (npm packs the one beside
// package.json; Apache-2.0 asks that the text go with every copy): it must
// be the repository's, word for word.
func TestLicenseIsTheRepositorys(t *testing.T) {
	uppy, err := os.ReadFile("LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	root, err := os.ReadFile("../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(uppy, root) {
		t.Error("uppy/LICENSE differs from the repository's LICENSE: copy it again (cp LICENSE uppy/LICENSE)")
	}
}
