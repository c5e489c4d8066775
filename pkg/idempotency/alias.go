package idempotency

import "github.com/onceupload/onceupload/internal/recordstore"

// The record store moved to internal/recordstore; these names keep its
// callers compiling until each imports it (or the narrow Store of this
// package) directly.
type (
	ID              = recordstore.ID
	State           = recordstore.State
	Response        = recordstore.Response
	Record          = recordstore.Record
	Update          = recordstore.Update
	ClaimResult     = recordstore.ClaimResult
	Store           = recordstore.Store
	GroupCounter    = recordstore.GroupCounter
	Options         = recordstore.Options
	Schema          = recordstore.Schema
	DynamoDBAPI     = recordstore.DynamoDBAPI
	DynamoStore     = recordstore.DynamoStore
	MemoryStore     = recordstore.MemoryStore
	InProgressError = recordstore.InProgressError
	ConflictError   = recordstore.ConflictError
)

const (
	IDLen           = recordstore.IDLen
	StateInProgress = recordstore.StateInProgress
	StatePending    = recordstore.StatePending
	StateCompleted  = recordstore.StateCompleted
	StateAborted    = recordstore.StateAborted
	DefaultTTL      = recordstore.DefaultTTL
	DefaultLease    = recordstore.DefaultLease
)

var (
	NewID          = recordstore.NewID
	ParseID        = recordstore.ParseID
	NewDynamoStore = recordstore.NewDynamoStore
	NewMemoryStore = recordstore.NewMemoryStore
	DefaultSchema  = recordstore.DefaultSchema
	Classify       = recordstore.Classify
	Transient      = recordstore.Transient

	ErrNotFound         = recordstore.ErrNotFound
	ErrKeyReused        = recordstore.ErrKeyReused
	ErrInProgress       = recordstore.ErrInProgress
	ErrAlreadyCompleted = recordstore.ErrAlreadyCompleted
	ErrAborted          = recordstore.ErrAborted
	ErrMismatch         = recordstore.ErrMismatch
	ErrUnavailable      = recordstore.ErrUnavailable
)
