package recordstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"
)

// MemoryStore is an in-memory Store with the same semantics as
// dynamostore.Store,
// for fast unit tests of code built on this package. The conformance tests
// run both against the same cases, so the two cannot drift apart.
type MemoryStore struct {
	opts    Options
	mu      sync.Mutex
	records map[ID]Record
}

var (
	_ Store        = (*MemoryStore)(nil)
	_ GroupCounter = (*MemoryStore)(nil)
)

// NewMemoryStore returns an empty store with the same Options as
// dynamostore.New.
func NewMemoryStore(optFns ...func(*Options)) *MemoryStore {
	return &MemoryStore{opts: NewOptions(optFns), records: map[ID]Record{}}
}

// TTL behaves as dynamostore.Store.TTL.
func (m *MemoryStore) TTL() time.Duration { return m.opts.TTL }

// Now behaves as dynamostore.Store.Now.
func (m *MemoryStore) Now() time.Time { return m.opts.Now() }

// Len returns how many records are stored, live or expired.
func (m *MemoryStore) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.records)
}

// Claim behaves as dynamostore.Store.Claim.
func (m *MemoryStore) Claim(_ context.Context, rec Record) (ClaimResult, error) {
	if rec.State != StatePending && rec.State != StateInProgress {
		return ClaimResult{}, fmt.Errorf("claim %s: state %q cannot be claimed", rec.ID, rec.State)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.opts.Now()
	if holder, ok := m.records[rec.ID]; ok && !holder.Expired(now) &&
		(holder.State != StateInProgress || !holder.LeaseExpiresAt.Before(truncMillis(now))) {
		return JudgeHolder(rec, clone(holder), now)
	}
	rec = clone(m.opts.Stamp(rec, now))
	m.records[rec.ID] = rec
	return ClaimResult{Record: clone(rec)}, nil
}

// Get behaves as dynamostore.Store.Get.
func (m *MemoryStore) Get(_ context.Context, id ID) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.records[id]
	if !ok || r.Expired(m.opts.Now()) {
		return Record{}, fmt.Errorf("get %s: %w", id, ErrNotFound)
	}
	return clone(r), nil
}

// Update behaves as dynamostore.Store.Update.
func (m *MemoryStore) Update(_ context.Context, id ID, claimID string, u Update) (Record, error) {
	enc, err := u.Encode()
	if err != nil {
		return Record{}, fmt.Errorf("update %s: %w", id, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.opts.Now()
	r, ok := m.records[id]
	var old *Record
	if ok {
		c := clone(r)
		old = &c
	}
	if !ok || r.Expired(now) && !u.Revive || r.ClaimID != claimID || r.State == StateCompleted || r.State == StateAborted {
		return Record{}, UpdateRefusal(id, claimID, u, old, now)
	}
	if u.From != "" && r.State != u.From {
		return Record{}, UpdateRefusal(id, claimID, u, old, now)
	}
	for _, f := range enc.RequireValues {
		if got, ok := r.Data.m[f.Name]; !ok || !sameValue(got, f.Value) {
			return Record{}, UpdateRefusal(id, claimID, u, old, now)
		}
	}
	for _, f := range enc.AbsentOrEqualValues {
		if got, ok := r.Data.m[f.Name]; ok && !sameValue(got, f.Value) {
			return Record{}, UpdateRefusal(id, claimID, u, old, now)
		}
	}
	r = clone(r)
	r.State, r.UpdatedAt, r.LeaseExpiresAt = u.State, truncMillis(now), time.Time{}
	if u.State == StateCompleted || u.State == StateAborted {
		r.Group = ""
	}
	if u.Response != nil {
		r.Response = Response{Body: append([]byte(nil), u.Response.Body...)}
	}
	if u.RestartExpiry {
		r.ExpiresAt = time.Unix(now.Add(m.opts.TTL).Unix(), 0)
	}
	maps.Copy(r.Data.m, enc.SetValues)
	for _, k := range enc.RemoveNames {
		delete(r.Data.m, k)
	}
	m.records[id] = r
	return clone(r), nil
}

// Release behaves as dynamostore.Store.Release.
func (m *MemoryStore) Release(_ context.Context, id ID, claimID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.records[id]; ok && r.ClaimID == claimID && r.State == StateInProgress {
		delete(m.records, id)
	}
	return nil
}

// CountGroup behaves as dynamostore.Store.CountGroup, but is never behind: a
// record counts the moment it is written.
func (m *MemoryStore) CountGroup(_ context.Context, group string, except ID) (int, error) {
	if group == "" {
		return 0, errors.New("count group: no group named")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.opts.Now()
	count := 0
	for id, r := range m.records {
		if r.Group == group && id != except && !r.Expired(now) {
			count++
		}
	}
	return count, nil
}

func clone(r Record) Record {
	r.Data = r.Data.clone()
	r.Response.Body = append([]byte(nil), r.Response.Body...)
	return r
}

// truncMillis matches the millisecond precision dynamostore.Store stores.
func truncMillis(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()) }
