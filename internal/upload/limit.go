package upload

import (
	"context"
	"errors"
	"fmt"

	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

// ErrTooManyUploads: the tenant already has Config.MaxPendingMultipart
// multipart uploads that are neither completed, aborted nor expired. A
// retry does not help until one of them ends; nothing was created.
var ErrTooManyUploads = errors.New("the tenant has as many multipart uploads pending as this deployment allows")

// multipartGroup is the record group of a tenant's multipart uploads
// (recordstore.Record.Group): a hash of the tenant, so that no tenant's
// text (an IAM ARN, a JWT subject) becomes an index key, at a fixed length.
func multipartGroup(tenant string) string {
	return "multipart#" + string(idempotency.NewID(tenant, "multipart"))
}

// admitMultipart lets a fresh multipart claim through when fewer than
// Config.MaxPendingMultipart of the tenant's other multipart uploads are
// unfinished; otherwise it releases the claim and refuses with
// ErrTooManyUploads.
//
// What counts is records, never a counter: every multipart claim carries
// the tenant's group, which the update to completed or aborted removes, so
// one Query of the table's sparse group index counts the uploads that are
// claimed, pending or aborting and not expired. An upload frees its place
// when it completes (by Complete, by finalize or by a status that finds
// its object), when it is aborted (by DELETE, or found aborted by S3's
// lifecycle rule), and when its record expires, at the second it does;
// signing parts, which renews an active upload, keeps it counted. A claim
// whose function died before recording its S3 upload counts until it
// expires or a retry with its key takes it over: its S3 upload may exist.
//
// The index is eventually consistent (on DynamoDB typically a fraction of
// a second behind the table): a burst of creates, concurrent or in quick
// succession, may pass the cap by about the number made within that lag,
// since each may not see the others' claims yet; at the cap, concurrent
// creates may instead all be refused, each seeing the others' claims
// before they are released. Creates spaced further apart see an exact
// count.
func (s *Service) admitMultipart(ctx context.Context, claim recordstore.Record) error {
	limit := s.cfg.MaxPendingMultipart
	if limit <= 0 {
		return nil
	}
	counter, ok := s.store.(recordstore.GroupCounter)
	if !ok {
		s.release(ctx, claim)
		return fmt.Errorf("create %s: Config.MaxPendingMultipart needs a store that counts groups (recordstore.GroupCounter)", claim.ClaimID)
	}
	others, err := counter.CountGroup(ctx, claim.Group, claim.ID)
	if err != nil {
		s.release(ctx, claim)
		return fmt.Errorf("create %s: count the tenant's multipart uploads: %w", claim.ClaimID, err)
	}
	if others < limit {
		return nil
	}
	// The refused claim must not hold a place: a client does not retry
	// this refusal, so a claim left behind would count until it expired.
	// If it cannot be released, the answer is the store's error instead,
	// which a client retries with the same key: the retry takes the claim
	// over once its lease runs out, and is refused (and released) then.
	rctx, cancel := cleanupContext(ctx)
	defer cancel()
	if err := s.store.Release(rctx, claim.ID, claim.ClaimID); err != nil {
		return fmt.Errorf("create %s: release a refused claim: %w", claim.ClaimID, err)
	}
	s.opts.Logger.InfoContext(ctx, "refused: the tenant's multipart uploads are at the limit",
		"upload_id", claim.ClaimID, "pending", others, "limit", limit)
	return fmt.Errorf("create: %w (%d pending, limit %d)", ErrTooManyUploads, others, limit)
}
