package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/client"
)

// stateFile remembers each upload by the file's identity (identify: the
// API's normalised base URL, the file's absolute path, size and
// modification time; a file that changed is a new upload with a new key):
// its key before the first request, its upload id and part size once
// created (a resumed upload must be cut as before), and, once completed,
// the completed body, for the idempotency window, so that a rerun says
// "already uploaded" without sending anything.
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

// fileID is a file's identity in the state file, written
// "api|abspath|size|mtime" (mtime in Unix nanoseconds).
type fileID struct {
	api         string // in client.NormalizeBaseURL's form
	path        string // absolute
	size, mtime int64
}

func (f fileID) String() string { return fmt.Sprintf("%s|%s|%d|%d", f.api, f.path, f.size, f.mtime) }

// parseID reads an id: the API is the text before the first '|' (a
// normalised URL holds none: it escapes one as %7C), size and mtime the
// last two fields, and the path what is between (it may hold a '|'). ok is
// false for anything else, which is left alone.
func parseID(id string) (f fileID, ok bool) {
	api, rest, ok := strings.Cut(id, "|")
	i := strings.LastIndexByte(rest, '|')
	if !ok || i < 0 {
		return fileID{}, false
	}
	rest, mtime := rest[:i], rest[i+1:]
	i = strings.LastIndexByte(rest, '|')
	if i < 0 {
		return fileID{}, false
	}
	path, size := rest[:i], rest[i+1:]
	var err1, err2 error
	f = fileID{api: api, path: path}
	f.size, err1 = strconv.ParseInt(size, 10, 64)
	f.mtime, err2 = strconv.ParseInt(mtime, 10, 64)
	return f, err1 == nil && err2 == nil && filepath.IsAbs(path)
}

// identify returns the id of file's upload to the API at apiURL. The API
// is its normalised base URL, so that every spelling of one API (case,
// default port, slashes) is one identity and one upload; another host name
// for the same server (localhost, 127.0.0.1) is another API.
func identify(apiURL, file string) (string, error) {
	norm, err := client.NormalizeBaseURL(apiURL)
	if err != nil {
		return "", err
	}
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
	return fileID{api: norm, path: abs, size: info.Size(), mtime: info.ModTime().UnixNano()}.String(), nil
}

// foldSpellings moves the entries whose API is spelled otherwise than
// identify spells it (written before identify normalised the API, when
// --api http://h:3000 and http://h:3000/ made two uploads of one file) to
// their normalised id, so that a rerun finds them, and reports whether it
// changed anything. Where one file has several, one is kept, the first of:
//  1. a completed one (load has dropped those past the window): the file is
//     stored, and a rerun says so without sending anything;
//  2. a pending one with an upload id: the server holds an upload for its
//     key, which a rerun resumes;
//  3. a bare key, which may never have reached the server;
//
// within a class, the most recently started (its key is furthest from the
// server's expiry of keys and of unfinished parts), then the smallest key,
// so that the choice never depends on map order. The others are dropped:
// their keys are never sent again (an unfinished upload in parts dropped
// so keeps its parts until the bucket's lifecycle rule aborts it).
func foldSpellings(entries map[string]entry) bool {
	class := func(e entry) int {
		switch {
		case e.Completed != nil && e.Upload != nil:
			return 1
		case e.UploadID != "":
			return 2
		}
		return 3
	}
	wins := func(a, b entry) bool {
		if ca, cb := class(a), class(b); ca != cb {
			return ca < cb
		}
		if !a.Started.Equal(b.Started) {
			return a.Started.After(b.Started)
		}
		return a.Key < b.Key
	}
	spellings := map[string][]string{} // normalised id → the ids it has
	for id := range entries {
		f, ok := parseID(id)
		if !ok {
			continue
		}
		norm, err := client.NormalizeBaseURL(f.api)
		if err != nil {
			continue
		}
		f.api = norm
		spellings[f.String()] = append(spellings[f.String()], id)
	}
	changed := false
	for norm, ids := range spellings {
		if len(ids) == 1 && ids[0] == norm {
			continue
		}
		winner := entries[ids[0]]
		for _, id := range ids[1:] {
			if e := entries[id]; wins(e, winner) {
				winner = e
			}
		}
		for _, id := range ids {
			delete(entries, id)
		}
		entries[norm] = winner
		changed = true
	}
	return changed
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
	folded := foldSpellings(entries)
	if !fn(entries) && !folded {
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

// unfinished names the uploads in parts to the API at apiURL (however it
// is spelled) that were created and not completed, as "path (upload id)",
// sorted: the ones a rerun on their files would finish.
func (s *stateFile) unfinished(apiURL string) ([]string, error) {
	norm, err := client.NormalizeBaseURL(apiURL)
	if err != nil {
		return nil, err
	}
	var out []string
	err = s.change(func(entries map[string]entry) bool {
		for id, e := range entries {
			if e.Completed != nil || e.UploadID == "" || e.PartSize == 0 {
				continue
			}
			if f, ok := parseID(id); ok && f.api == norm { // change has folded the spellings
				out = append(out, fmt.Sprintf("%s (upload %s)", f.path, e.UploadID))
			}
		}
		return false
	})
	slices.Sort(out)
	return out, err
}
