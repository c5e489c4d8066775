package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// stateFile remembers the key of each unfinished upload, by the file's
// identity: the API, its absolute path, size and modification time. A file
// that changed is a new upload with a new key.
type stateFile struct {
	path string
}

type pendingEntry struct {
	Key     string    `json:"key"`
	Started time.Time `json:"started"`
}

func identify(api, file string) (string, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return "", err
	}
	info, err := os.Stat(abs)
	if err != nil {
		return "", err
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("%s: not a regular file", file)
	}
	return fmt.Sprintf("%s|%s|%d|%d", api, abs, info.Size(), info.ModTime().UnixNano()), nil
}

func (s *stateFile) load() (map[string]pendingEntry, error) {
	entries := map[string]pendingEntry{}
	raw, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return entries, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("%s: %w", s.path, err)
	}
	return entries, nil
}

// save writes atomically (temporary file, then rename), so a crash leaves
// the old or the new state, never half of one.
func (s *stateFile) save(entries map[string]pendingEntry) error {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), ".pending-*.json")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(raw); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	tmp.Close()
	return os.Rename(tmp.Name(), s.path)
}

// keyFor returns the stored key of id, or stores and returns a new one.
func (s *stateFile) keyFor(id string, mint func() string) (string, error) {
	entries, err := s.load()
	if err != nil {
		return "", err
	}
	if e, ok := entries[id]; ok {
		return e.Key, nil
	}
	key := mint()
	entries[id] = pendingEntry{Key: key, Started: time.Now().UTC()}
	return key, s.save(entries)
}

func (s *stateFile) forget(id string) error {
	entries, err := s.load()
	if err != nil {
		return err
	}
	if _, ok := entries[id]; !ok {
		return nil
	}
	delete(entries, id)
	return s.save(entries)
}
