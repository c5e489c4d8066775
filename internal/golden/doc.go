// Package golden holds the golden-items test: what the upload service and
// MakeIdempotent write to a table, item by item and attribute by
// attribute, and every expression they send, held to files under testdata
// so that no refactor of the stores changes what deployed tables hold. It
// has no code of its own.
package golden
