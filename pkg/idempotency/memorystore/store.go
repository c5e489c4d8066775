// Package memorystore is an [idempotency.Store] in memory, with the
// semantics of package dynamostore's store, for fast tests of code built
// on package idempotency: both are package recordstore's engine, whose
// conformance tests hold the two to the same cases. It links no DynamoDB
// client.
//
//	store := memorystore.New()
//	handler := idempotency.MakeIdempotent(store, charge, opts)
package memorystore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

// Store is an in-memory store of records: an idempotency.Store (Claim, Get,
// Complete, Release) and a recordstore.Store (ClaimRecord, GetRecord,
// Update, CountGroup) on the same records.
type Store struct {
	opts    idempotency.Options
	mu      sync.Mutex
	records map[idempotency.ID]recordstore.Record
}

var (
	_ idempotency.Store        = (*Store)(nil)
	_ recordstore.Store        = (*Store)(nil)
	_ recordstore.GroupCounter = (*Store)(nil)
)

// New returns an empty store with the same Options as dynamostore.New
// (Options.Schema aside, which it has no use for).
func New(optFns ...func(*idempotency.Options)) *Store {
	return &Store{opts: idempotency.NewOptions(optFns...), records: map[idempotency.ID]recordstore.Record{}}
}

// Claim is idempotency.Store's Claim: see recordstore.Claim.
func (m *Store) Claim(ctx context.Context, rec idempotency.Record) (idempotency.ClaimResult, error) {
	return recordstore.Claim(ctx, m, rec)
}

// Get is idempotency.Store's Get.
func (m *Store) Get(ctx context.Context, id idempotency.ID) (idempotency.Record, error) {
	return recordstore.Get(ctx, m, id)
}

// Complete is idempotency.Store's Complete: see recordstore.Complete.
func (m *Store) Complete(ctx context.Context, id idempotency.ID, claimID string, resp idempotency.Response) (idempotency.Record, error) {
	return recordstore.Complete(ctx, m, id, claimID, resp)
}

// TTL behaves as dynamostore.Store.TTL.
func (m *Store) TTL() time.Duration { return m.opts.TTL }

// Now behaves as dynamostore.Store.Now.
func (m *Store) Now() time.Time { return m.opts.Now() }

// Len returns how many records are stored, live or expired.
func (m *Store) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.records)
}

// Put writes rec as it is, every field as given and none stamped,
// replacing any record of its ID: a test's way to plant a record that
// another writer left (an older version of the code, a hand edit).
func (m *Store) Put(rec recordstore.Record) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.records[rec.ID] = recordstore.Clone(rec)
}

// ClaimRecord behaves as dynamostore.Store.ClaimRecord.
func (m *Store) ClaimRecord(_ context.Context, rec recordstore.Record) (recordstore.ClaimResult, error) {
	if rec.State != recordstore.StatePending && rec.State != idempotency.StateInProgress {
		return recordstore.ClaimResult{}, fmt.Errorf("claim %s: state %q cannot be claimed", rec.ID, rec.State)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.opts.Now()
	if holder, ok := m.records[rec.ID]; ok && recordstore.Holds(holder, now, rec.NoTakeover) {
		return recordstore.JudgeHolder(rec, recordstore.Clone(holder), now)
	}
	rec = recordstore.Clone(recordstore.Stamp(&m.opts, rec, now))
	m.records[rec.ID] = rec
	return recordstore.ClaimResult{Record: recordstore.Clone(rec)}, nil
}

// GetRecord behaves as dynamostore.Store.GetRecord.
func (m *Store) GetRecord(_ context.Context, id idempotency.ID) (recordstore.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.records[id]
	if !ok || r.Expired(m.opts.Now()) {
		return recordstore.Record{}, fmt.Errorf("get %s: %w", id, idempotency.ErrNotFound)
	}
	return recordstore.Clone(r), nil
}

// Update behaves as dynamostore.Store.Update.
func (m *Store) Update(_ context.Context, id idempotency.ID, claimID string, u recordstore.Update) (recordstore.Record, error) {
	enc, err := u.Encode()
	if err != nil {
		return recordstore.Record{}, fmt.Errorf("update %s: %w", id, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.opts.Now()
	r, ok := m.records[id]
	if !ok {
		return recordstore.Record{}, recordstore.UpdateRefusal(id, claimID, u, nil, now)
	}
	if !enc.Admits(r, claimID, now) {
		old := recordstore.Clone(r)
		return recordstore.Record{}, recordstore.UpdateRefusal(id, claimID, u, &old, now)
	}
	r = enc.Apply(r, now, m.opts.TTL)
	m.records[id] = r
	return recordstore.Clone(r), nil
}

// Release behaves as dynamostore.Store.Release.
func (m *Store) Release(_ context.Context, id idempotency.ID, claimID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.records[id]; ok && r.ClaimID == claimID && r.State == idempotency.StateInProgress {
		delete(m.records, id)
	}
	return nil
}

// CountGroup behaves as dynamostore.Store.CountGroup, but is never behind:
// a record counts the moment it is written.
func (m *Store) CountGroup(_ context.Context, group string, except idempotency.ID) (int, error) {
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
