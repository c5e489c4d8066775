// Package golden holds the golden-items test: what the upload service and
// MakeIdempotent write to a table, item by item and attribute by
// attribute, every expression they send, and every body the service
// answers with, held to files under testdata so that no refactor of the
// stores changes what deployed tables hold. testdata/former_items.json
// holds the items of the stored forms before the present one, which
// deployed tables hold too, and the code of now is held to them. It has
// no code of its own.
package golden
