package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stateWriterEnv, set, makes TestStateFileRunsTakeTurns a run of the
// command sharing a state file: "path|name|count" adds count entries.
const stateWriterEnv = "ONCEUPLOAD_TEST_STATE_WRITER"

// Runs at once (processes, as two `upload` commands are) that share a
// state file take turns at it: none loses another's entries, which would
// mint a second key for a file and store it twice.
func TestStateFileRunsTakeTurns(t *testing.T) {
	if spec := os.Getenv(stateWriterEnv); spec != "" {
		writeEntries(t, spec)
		return
	}
	const runs, each = 4, 50
	path := filepath.Join(t.TempDir(), "state", "pending.json")
	cmds, outs := make([]*exec.Cmd, runs), make([]bytes.Buffer, runs)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^TestStateFileRunsTakeTurns$", "-test.count=1")
		cmds[i].Env = append(os.Environ(), fmt.Sprintf("%s=%s|run%d|%d", stateWriterEnv, path, i, each))
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, outs[i].Bytes())
		}
	}
	entries, err := (&stateFile{path: path, window: time.Hour}).load()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != runs*each {
		t.Errorf("the state file holds %d entries, want %d: runs lost each other's", len(entries), runs*each)
	}
}

// writeEntries adds the entries spec ("path|name|count") says, one change
// at a time, as a run adds its files'.
func writeEntries(t *testing.T, spec string) {
	var path, name string
	var count int
	if parts := strings.SplitN(spec, "|", 3); len(parts) == 3 {
		path, name = parts[0], parts[1]
		count, _ = strconv.Atoi(parts[2])
	}
	if count == 0 {
		t.Fatalf("%s=%q: want path|name|count", stateWriterEnv, spec)
	}
	s := &stateFile{path: path, window: time.Hour}
	for i := range count {
		id := fileID{api: "http://127.0.0.1:1", path: fmt.Sprintf("/%s/%d", name, i), size: 1, mtime: 1}.String()
		if _, err := s.entryFor(id, func() string { return fmt.Sprintf("key-%s-%d", name, i) }); err != nil {
			t.Fatal(err)
		}
	}
}
