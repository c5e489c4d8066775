package main

import "github.com/gofrs/flock"

// lockFile holds an exclusive lock on path (created if need be) until
// unlock is called: runs of the command sharing a state file take turns.
// It waits for the lock, and locks on every platform the CLI is built for
// (flock(2) on Unix, LockFileEx on Windows); where no lock can be had, it
// fails rather than let runs lose each other's entries.
func lockFile(path string) (unlock func(), err error) {
	l := flock.New(path)
	if err := l.Lock(); err != nil {
		return nil, err
	}
	return func() { _ = l.Unlock() }, nil
}
