package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceupload/onceupload/pkg/idempotency"
)

// DefaultKeyPrefix is Options.KeyPrefix's default.
const DefaultKeyPrefix = "idempotency:"

// keyGrace is how long a key outlives its record's expiry: the record's
// expiry is the store's clock's, the key's TTL the server's.
const keyGrace = time.Minute

// Options configure a Store.
type Options struct {
	// TTL is how long a record lives after it is claimed. Defaults to
	// idempotency.DefaultTTL.
	TTL time.Duration
	// Lease is how long an in-progress claim blocks other requests before
	// it may be taken over, unless the claim sets Record.Lease. Defaults to
	// idempotency.DefaultLease.
	Lease time.Duration
	// Now is the clock expiry and leases are judged by. Defaults to
	// time.Now.
	Now func() time.Time
	// KeyPrefix is put before a record's ID to make its key, so that
	// records share a database with other keys. Defaults to
	// DefaultKeyPrefix, "idempotency:".
	KeyPrefix string
}

// Store is an idempotency.Store on Redis: see the package doc.
type Store struct {
	client redis.Scripter
	opts   Options
}

var _ idempotency.Store = (*Store)(nil)

// New returns a store on client: a *redis.Client, *redis.ClusterClient or
// *redis.Ring (each is a redis.Scripter, all this store calls), with its
// own pool, timeouts and retries.
func New(client redis.Scripter, optFns ...func(*Options)) *Store {
	o := Options{TTL: idempotency.DefaultTTL, Lease: idempotency.DefaultLease, Now: time.Now, KeyPrefix: DefaultKeyPrefix}
	for _, fn := range optFns {
		fn(&o)
	}
	return &Store{client: client, opts: o}
}

// Key returns the Redis key of id's record.
func (s *Store) Key(id idempotency.ID) string { return s.opts.KeyPrefix + string(id) }

// fieldsLua reads HGETALL's answer h into f, a table of the record's fields.
const fieldsLua = `
local h = redis.call('HGETALL', KEYS[1])
local f = {}
for i = 1, #h, 2 do f[h[i]] = h[i + 1] end
`

// claimScript writes the record ARGV[5..] (field, value pairs) at KEYS[1]
// with a TTL of ARGV[3] ms, unless a live record holds the key at ARGV[1]
// (epoch seconds) and ARGV[2] (epoch milliseconds): one not expired, and
// not an in-progress claim whose lease ran out, unless ARGV[4] is "1"
// (Record.NoTakeover). An in-progress record without a lease holds until
// it expires. This is idempotency.Free's rule. It answers 1 when it wrote,
// else the holder's fields.
var claimScript = redis.NewScript(fieldsLua + `
if #h > 0 and tonumber(f.expires_at or 0) >= tonumber(ARGV[1]) and
    (f.state ~= 'in_progress' or f.lease_expires_at == nil or ARGV[4] == '1' or
     tonumber(f.lease_expires_at) >= tonumber(ARGV[2])) then
  return h
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 5))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`)

// completeScript records the response ARGV[4] on the claim ARGV[1] at
// ARGV[2] (epoch seconds) and ARGV[3] (epoch milliseconds), if the live
// record is that claim's. It answers 0 when there is no such record, else
// {1, fields} when it completed it and {2, fields} when it was completed
// already.
var completeScript = redis.NewScript(fieldsLua + `
if f.claim_id ~= ARGV[1] or tonumber(f.expires_at or 0) < tonumber(ARGV[2]) then
  return 0
end
if f.state == 'completed' then
  return {2, h}
end
redis.call('HSET', KEYS[1], 'state', 'completed', 'updated_at', ARGV[3], 'response', ARGV[4])
redis.call('HDEL', KEYS[1], 'lease_expires_at')
return {1, redis.call('HGETALL', KEYS[1])}
`)

// releaseScript deletes KEYS[1] if it is the in-progress claim ARGV[1].
var releaseScript = redis.NewScript(`
local f = redis.call('HMGET', KEYS[1], 'claim_id', 'state')
if f[1] == ARGV[1] and f[2] == 'in_progress' then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// getScript reads a record: a script, so that the store needs no more of
// the client than scripts.
var getScript = redis.NewScript(`return redis.call('HGETALL', KEYS[1])`)

// Claim is idempotency.Store.Claim: one script that claims the key or
// answers with its holder.
func (s *Store) Claim(ctx context.Context, rec idempotency.Record) (idempotency.ClaimResult, error) {
	if rec.State != "" && rec.State != idempotency.StateInProgress {
		return idempotency.ClaimResult{}, fmt.Errorf("claim %s: state %q cannot be claimed; a claim is in progress", rec.ID, rec.State)
	}
	now := s.opts.Now()
	claim := rec // as asked, for JudgeClaim
	lease := s.opts.Lease
	if rec.Lease > 0 {
		lease = rec.Lease
	}
	rec.State, rec.Lease, rec.NoTakeover, rec.Response = idempotency.StateInProgress, 0, false, idempotency.Response{}
	rec.CreatedAt, rec.UpdatedAt = millis(now), millis(now)
	rec.ExpiresAt = time.Unix(now.Add(s.opts.TTL).Unix(), 0)
	rec.LeaseExpiresAt = millis(now.Add(lease))
	keyTTL := rec.ExpiresAt.Sub(now) + keyGrace
	noTakeover := "0"
	if claim.NoTakeover {
		noTakeover = "1"
	}
	args := []any{now.Unix(), now.UnixMilli(), keyTTL.Milliseconds(), noTakeover,
		"tenant", rec.Tenant, "claim_id", rec.ClaimID, "fingerprint", rec.Fingerprint, "state", string(rec.State),
		"created_at", rec.CreatedAt.UnixMilli(), "updated_at", rec.UpdatedAt.UnixMilli(),
		"expires_at", rec.ExpiresAt.Unix(), "lease_expires_at", rec.LeaseExpiresAt.UnixMilli()}
	v, err := claimScript.Run(ctx, s.client, []string{s.Key(rec.ID)}, args...).Result()
	if err != nil {
		return idempotency.ClaimResult{}, fmt.Errorf("claim %s: %w", rec.ID, classify(err))
	}
	if n, ok := v.(int64); ok && n == 1 {
		return idempotency.ClaimResult{Record: rec}, nil
	}
	holder, err := decode(rec.ID, v)
	if err != nil {
		return idempotency.ClaimResult{}, fmt.Errorf("claim %s: %w", rec.ID, err)
	}
	return idempotency.JudgeClaim(claim, holder, now)
}

// Get is idempotency.Store.Get.
func (s *Store) Get(ctx context.Context, id idempotency.ID) (idempotency.Record, error) {
	v, err := getScript.Run(ctx, s.client, []string{s.Key(id)}).Result()
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("get %s: %w", id, classify(err))
	}
	r, err := decode(id, v)
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("get %s: %w", id, err)
	}
	if r.ClaimID == "" {
		return idempotency.Record{}, fmt.Errorf("get %s: %w", id, idempotency.ErrNotFound)
	}
	if r.Expired(s.opts.Now()) {
		return idempotency.Record{}, fmt.Errorf("get %s: expired: %w", id, idempotency.ErrNotFound)
	}
	return r, nil
}

// Complete is idempotency.Store.Complete: one script that completes the
// record only if it is still claimID's and live.
func (s *Store) Complete(ctx context.Context, id idempotency.ID, claimID string, resp idempotency.Response) (idempotency.Record, error) {
	now := s.opts.Now()
	v, err := completeScript.Run(ctx, s.client, []string{s.Key(id)}, claimID, now.Unix(), now.UnixMilli(), resp.Body).Result()
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("complete %s: %w", id, classify(err))
	}
	answer, ok := v.([]any)
	if !ok || len(answer) != 2 {
		return idempotency.Record{}, fmt.Errorf("complete %s claim %s: %w", id, claimID, idempotency.ErrNotFound)
	}
	r, err := decode(id, answer[1])
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("complete %s: %w", id, err)
	}
	if answer[0] != int64(1) {
		return idempotency.Record{}, fmt.Errorf("complete %s: %w", id, &idempotency.ConflictError{Err: idempotency.ErrAlreadyCompleted, Existing: r})
	}
	return r, nil
}

// Release is idempotency.Store.Release: one script that deletes the record
// only if it is still claimID's in-progress claim.
func (s *Store) Release(ctx context.Context, id idempotency.ID, claimID string) error {
	if err := releaseScript.Run(ctx, s.client, []string{s.Key(id)}, claimID).Err(); err != nil {
		return fmt.Errorf("release %s: %w", id, classify(err))
	}
	return nil
}

// decode reads a record of id from HGETALL's answer, as a script returns
// it: field, value, field, value. No fields is the zero Record.
func decode(id idempotency.ID, v any) (idempotency.Record, error) {
	flat, ok := v.([]any)
	if !ok || len(flat)%2 != 0 {
		return idempotency.Record{}, fmt.Errorf("redis answered %T, want a record's fields", v)
	}
	if len(flat) == 0 {
		return idempotency.Record{}, nil
	}
	r := idempotency.Record{ID: id}
	for i := 0; i < len(flat); i += 2 {
		name, _ := flat[i].(string)
		value, _ := flat[i+1].(string)
		var err error
		switch name {
		case "tenant":
			r.Tenant = value
		case "claim_id":
			r.ClaimID = value
		case "fingerprint":
			r.Fingerprint = value
		case "state":
			r.State = idempotency.State(value)
		case "response":
			r.Response.Body = []byte(value)
		case "created_at":
			r.CreatedAt, err = epoch(value, time.UnixMilli)
		case "updated_at":
			r.UpdatedAt, err = epoch(value, time.UnixMilli)
		case "lease_expires_at":
			r.LeaseExpiresAt, err = epoch(value, time.UnixMilli)
		case "expires_at":
			r.ExpiresAt, err = epoch(value, func(s int64) time.Time { return time.Unix(s, 0) })
		}
		if err != nil {
			return idempotency.Record{}, fmt.Errorf("field %s: %w", name, err)
		}
	}
	return r, nil
}

func epoch(s string, at func(int64) time.Time) (time.Time, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	return at(n), nil
}

// millis is t with the millisecond precision the store keeps.
func millis(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()) }

// transientPrefixes are the errors of a server that cannot take the call
// now but may soon: loading its data, running a long script, a cluster
// resharding or without a majority, a replica promoted or not yet synced,
// and out of memory under noeviction.
var transientPrefixes = []string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "OOM"}

// classify marks an error a later retry can cure, once the client's own
// retries gave up, with idempotency.ErrUnavailable: the network, a
// deadline, or a server that said so.
func classify(err error) error {
	var netErr net.Error
	transient := errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
	for _, p := range transientPrefixes {
		transient = transient || redis.HasErrorPrefix(err, p)
	}
	if transient {
		return fmt.Errorf("%w: %w", idempotency.ErrUnavailable, err)
	}
	return err
}
