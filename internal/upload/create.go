package upload

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/onceupload/onceupload/internal/upload/uploadrecord"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

// Create claims key for the tenant and answers with a presigned PUT
// (EffectCreated), or replays the answer recorded for the key
// (EffectReplayed). The record holds the answer's body, or for a single
// PUT the fields and URL it is rebuilt from byte for byte (compactPut): the
// bytes every replay returns; how to answer is the caller's choice. Errors:
// *api.RequestError (a value the contract or the deployment refuses,
// ErrFileTooLarge, ErrNeedsParts and ErrUnsupportedMedia among them),
// ErrTooManyUploads (a new multipart upload past the tenant's cap), and the
// store's ErrKeyReused, ErrInProgress and ErrUnavailable (test with
// errors.Is).
func (s *Service) Create(ctx context.Context, tenant, key string, req api.CreateRequest) (Result, error) {
	r, err := validateCreate(req, &s.cfg)
	if err != nil {
		return Result{}, err
	}
	id := idempotency.NewID(tenant, key)
	uploadID, err := newUploadID(id, s.opts.Random)
	if err != nil {
		return Result{}, err
	}
	pending := api.Upload{
		UploadID: uploadID, Status: api.StatusPending, StorageKey: s.cfg.Prefix + uploadID,
		Filename: r.Filename, ContentType: r.ContentType, Bytes: r.Size, SHA256: r.SHA256,
	}
	claim := recordstore.Record{Record: idempotency.Record{ID: id, Tenant: tenant, ClaimID: uploadID, Fingerprint: fingerprint(tenant, r)}}
	f := uploadrecord.Fields{
		KeyPrefix: s.cfg.Prefix, Filename: r.Filename, ContentType: r.ContentType,
		Size: r.Size, SHA256: uploadrecord.Sum256(r.SHA256), PartSize: r.PartSize,
	}
	if s.cfg.Prefix == "" {
		// An empty prefix is no attribute (every field is omitempty), so
		// the key is stored: it is the upload id, as long.
		f.ObjectKey = pending.StorageKey
	}
	if r.PartSize > 0 {
		pending.Multipart = &api.Multipart{PartSize: r.PartSize, PartCount: api.PartCount(r.Size, r.PartSize)}
		claim.State = idempotency.StateInProgress
		if claim.Data, err = f.Encode(); err != nil {
			return Result{}, err
		}
		return s.createMultipart(ctx, claim, pending)
	}
	// Everything the record holds is computed before the one put, so no
	// record ever exists without its response. The URL expires no later
	// than the claim will.
	body, put, err := s.pendingBody(ctx, pending, min(s.cfg.PresignTTL, s.store.TTL()))
	if err != nil {
		return Result{}, err
	}
	claim.State = recordstore.StatePending
	if !compactPut(&f, pending, put) {
		// A URL the record cannot rebuild is recorded whole, in its body.
		claim.Response = idempotency.Response{Body: body}
		f.URLExpires = put.ExpiresAt
	}
	if claim.Data, err = f.Encode(); err != nil {
		return Result{}, err
	}
	res, err := s.store.ClaimRecord(ctx, claim)
	if err != nil {
		return Result{}, s.claimError(ctx, err)
	}
	if res.Replayed {
		return s.replay(ctx, res.Record)
	}
	s.opts.Logger.InfoContext(ctx, "claimed", "upload_id", uploadID)
	return Result{UploadID: uploadID, Body: body, Effect: EffectCreated}, nil
}

// claimError logs and wraps a claim that did not go through.
func (s *Service) claimError(ctx context.Context, err error) error {
	var conflict *recordstore.ConflictError
	if errors.As(err, &conflict) {
		s.opts.Logger.InfoContext(ctx, "key reused with a different request", "upload_id", conflict.Existing.ClaimID)
	}
	return fmt.Errorf("create: %w", err)
}

// replay answers a create from the record that holds its key.
func (s *Service) replay(ctx context.Context, holder recordstore.Record) (Result, error) {
	rec, err := uploadrecord.Decode(holder)
	if err != nil {
		return Result{}, err
	}
	body, err := s.replayBody(ctx, rec)
	if err != nil {
		return Result{}, err
	}
	s.opts.Logger.InfoContext(ctx, "replayed", "upload_id", rec.ClaimID, "state", rec.State)
	return Result{UploadID: rec.ClaimID, Body: body, Effect: EffectReplayed}, nil
}

// replayBody is the answer recorded for rec: the completed body, or the
// pending body as first sent while its URL is valid, else re-signed.
func (s *Service) replayBody(ctx context.Context, rec uploadrecord.Stored) ([]byte, error) {
	if rec.Final() {
		return finalBody(rec)
	}
	if rec.Multipart() {
		return rec.Response.Body, nil // no URL in it: parts are signed on request
	}
	body, expires, ok, err := recordedBody(&rec)
	if err != nil {
		return nil, fmt.Errorf("record %s: %w", rec.ClaimID, err)
	}
	if ok && s.store.Now().Before(expires) {
		return body, nil
	}
	body, _, err = s.pendingBody(ctx, rec.Upload(), s.urlLifetime(rec.ExpiresAt))
	return body, err
}

// pendingBody presigns the PUT for u, valid for lifetime, and renders the
// pending body; it returns the instructions the body holds.
func (s *Service) pendingBody(ctx context.Context, u api.Upload, lifetime time.Duration) ([]byte, *api.PutInstructions, error) {
	sum, err := hex.DecodeString(u.SHA256)
	if err != nil {
		return nil, nil, fmt.Errorf("presign %s: sha256: %w", u.UploadID, err)
	}
	// Signing Content-Length, Content-Type and the checksum makes S3 itself
	// refuse any other bytes.
	req, err := s.presigner.PresignPutObject(ctx, &PresignInput{
		Key:            u.StorageKey,
		ContentType:    u.ContentType,
		ContentLength:  u.Bytes,
		ChecksumSHA256: base64.StdEncoding.EncodeToString(sum),
		Expires:        lifetime,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("presign %s: %w", u.UploadID, err)
	}
	if u.Upload, err = putInstructions(req); err != nil {
		return nil, nil, fmt.Errorf("presign %s: %w", u.UploadID, err)
	}
	body, err := encode(u)
	return body, u.Upload, err
}
