package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/onceupload/onceupload/pkg/api"
)

// stateFile remembers each upload by the file's identity (the API, its
// absolute path, size and modification time; a file that changed is a new
// upload with a new key): its key before the first request, its upload id
// and part size once created (a resumed upload must be cut as before), and,
// once completed, the completed body, for the idempotency window, so that a
// rerun says "already uploaded" without sending anything.
type stateFile struct {
	path string
	// window is how long a completed entry is kept: the server's
	// idempotency window, after which the key would make a new upload.
	window time.Duration
	now    func() time.Time
}

type entry struct {
	Key     string    `json:"key"`
	Started time.Time `json:"started"`
	// UploadID is for people reading the file: which upload a run in
	// progress is (Upload holds it once completed).
	UploadID string `json:"uploadId,omitempty"`
	PartSize int64  `json:"partSize,omitempty"`
	// Completed and Upload are set once the upload completed.
	Completed *time.Time  `json:"completed,omitempty"`
	Upload    *api.Upload `json:"upload,omitempty"`
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

func (s *stateFile) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now().UTC()
}

// load reads the entries, leaving out completed ones older than the window.
func (s *stateFile) load() (map[string]entry, error) {
	entries := map[string]entry{}
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
	for id, e := range entries {
		if e.Completed != nil && s.clock().Sub(*e.Completed) >= s.window {
			delete(entries, id)
		}
	}
	return entries, nil
}

// save writes atomically (temporary file, then rename), so a crash leaves
// the old or the new state, never half of one.
func (s *stateFile) save(entries map[string]entry) error {
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

// change runs fn on the entries under the state file's lock, and saves
// them when fn says it changed them: two runs at once (upload a & upload b)
// never lose each other's entries, which would mint a second key for a
// file and store it twice.
func (s *stateFile) change(fn func(entries map[string]entry) (changed bool)) error {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return err
	}
	unlock, err := lockFile(s.path + ".lock")
	if err != nil {
		return fmt.Errorf("lock %s: %w", s.path, err)
	}
	defer unlock()
	entries, err := s.load()
	if err != nil {
		return err
	}
	if !fn(entries) {
		return nil
	}
	return s.save(entries)
}

// entryFor returns the entry of id, storing a new one with a minted key
// if there is none.
func (s *stateFile) entryFor(id string, mint func() string) (entry, error) {
	var e entry
	err := s.change(func(entries map[string]entry) bool {
		var ok bool
		if e, ok = entries[id]; ok {
			return false
		}
		e = entry{Key: mint(), Started: s.clock()}
		entries[id] = e
		return true
	})
	return e, err
}

// update changes the entry of id, if it is still there.
func (s *stateFile) update(id string, change func(*entry)) error {
	return s.change(func(entries map[string]entry) bool {
		e, ok := entries[id]
		if ok {
			change(&e)
			entries[id] = e
		}
		return ok
	})
}

// created records the upload id and part size of id's upload.
func (s *stateFile) created(id string, u *api.Upload) error {
	return s.update(id, func(e *entry) {
		e.UploadID = u.UploadID
		if u.Multipart != nil {
			e.PartSize = u.Multipart.PartSize
		}
	})
}

// completed records id's upload as done, with its completed body.
func (s *stateFile) completed(id string, u api.Upload) error {
	return s.update(id, func(e *entry) {
		now := s.clock()
		e.Completed, e.Upload, e.UploadID = &now, &u, u.UploadID
	})
}

func (s *stateFile) forget(id string) error {
	return s.change(func(entries map[string]entry) bool {
		_, ok := entries[id]
		delete(entries, id)
		return ok
	})
}

// unfinished names the uploads in parts to the API at apiURL that were
// created and not completed, as "path (upload id)", sorted: the ones a
// rerun on their files would finish.
func (s *stateFile) unfinished(apiURL string) ([]string, error) {
	var out []string
	err := s.change(func(entries map[string]entry) bool {
		for id, e := range entries {
			if e.Completed != nil || e.UploadID == "" || e.PartSize == 0 {
				continue
			}
			// id is "api|path|size|mtime" (identify).
			rest, ok := strings.CutPrefix(id, apiURL+"|")
			for range 2 {
				if i := strings.LastIndexByte(rest, '|'); ok && i >= 0 {
					rest = rest[:i]
				} else {
					ok = false
				}
			}
			if ok {
				out = append(out, fmt.Sprintf("%s (upload %s)", rest, e.UploadID))
			}
		}
		return false
	})
	slices.Sort(out)
	return out, err
}
