package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckRIE(t *testing.T) {
	for _, c := range []struct {
		rie    bool
		goos   string
		refuse bool
	}{
		{false, "linux", false}, {true, "linux", false},
		{false, "darwin", false}, {true, "darwin", true},
		{true, "freebsd", true},
	} {
		err := checkRIE(c.rie, c.goos)
		if (err != nil) != c.refuse {
			t.Errorf("checkRIE(%v, %q) = %v, want refused %v", c.rie, c.goos, err, c.refuse)
		}
		if err != nil && (!strings.Contains(err.Error(), "needs Linux") || !strings.Contains(err.Error(), c.goos)) {
			t.Errorf("checkRIE(%v, %q): the message should say Linux is needed and what this is: %v", c.rie, c.goos, err)
		}
	}
}

func TestDemo(t *testing.T) {
	dir := t.TempDir()
	if got := demo("http://127.0.0.1:3000", dir); !strings.Contains(got, "make web-build") {
		t.Errorf("without index.html: %q, want how to build it", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte("<!doctype html>"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := demo("http://127.0.0.1:3000", dir); got != "http://127.0.0.1:3000/" {
		t.Errorf("with index.html: %q, want the API's address", got)
	}
}

// The banner says which origins CORS allows: the list, the demo's own among them.
func TestOrigins(t *testing.T) {
	for _, c := range []struct {
		list []string
		want string
	}{
		{[]string{"*"}, "* (CORS of the API and the bucket: any page; ALLOWED_ORIGINS=https://… narrows it)"},
		{
			[]string{"https://good.example", "http://127.0.0.1:3000", "http://localhost:3000"},
			"https://good.example, http://127.0.0.1:3000, http://localhost:3000 (CORS of the API and the bucket: ALLOWED_ORIGINS and the demo's own)",
		},
	} {
		if got := origins(c.list); got != c.want {
			t.Errorf("origins(%q) = %q, want %q", c.list, got, c.want)
		}
	}
}
