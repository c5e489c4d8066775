// Package redisstore is an [idempotency.Store] on Redis 7 or Valkey,
// through go-redis v9: pass a *redis.Client, a *redis.ClusterClient, a
// *redis.Ring or anything else that is a [redis.Scripter].
//
//	store := redisstore.New(redis.NewClient(&redis.Options{Addr: addr}))
//	handler := idempotency.MakeIdempotent(store, charge, opts)
//
// It has the semantics and the fencing of [dynamostore.Store], and
// is held to the same cases (package storetest): every operation is one
// Lua script, atomic on the server, in one round trip. A claim writes the
// record if the key is free (never claimed, expired, or an in-progress
// claim whose lease ran out, which it takes over) and otherwise answers
// with the record that holds it, so a replay costs that one call too;
// Complete and Release change a record only if it is still their claim's
// (its claim id), so late work for an earlier claim never touches a newer
// one. Get reads the primary, as a strongly consistent read does.
//
// A record is a Redis hash at KeyPrefix+ID, with the fields tenant,
// claim_id, fingerprint, state ("in_progress" or "completed"), response
// (the body's bytes), created_at, updated_at and lease_expires_at (epoch
// milliseconds) and expires_at (epoch seconds): HGETALL shows it. Expiry
// is judged by the store's clock (Options.Now), passed to each script,
// never by the server's, so a record is absent from the moment it expires
// whatever the key's TTL; the key also gets a TTL one minute past the
// record's expiry, relative to the server's clock, so Redis removes it
// without a sweep and a clock that differs from the server's by less than
// that never loses a live record.
//
// # Durability
//
// Redis keeps records in memory, and what survives a failure is what its
// configuration makes durable: choose it knowingly, because a lost claim
// means a retry runs the work again (a second charge), as if the key were
// new.
//
//   - Eviction: under maxmemory, the volatile-* policies (volatile-lru,
//     the default of ElastiCache and MemoryDB parameter groups,
//     volatile-lfu, volatile-ttl, volatile-random) evict keys with a TTL,
//     which every record has, and allkeys-* evict any key: records vanish
//     under memory pressure while they should hold. Set
//     maxmemory-policy noeviction, so a full server refuses writes
//     (claims fail with an error, not silently) instead of forgetting.
//   - Restarts: without AOF a restart loses every write since the last
//     RDB snapshot (all of them with save ""). With appendonly yes,
//     appendfsync everysec loses at most about a second of writes in a
//     crash of the machine (a crash of the process alone loses none), and
//     appendfsync always loses none but fsyncs every write.
//   - Failover: replication is asynchronous, so a primary that fails
//     after it answered a claim but before a replica received it takes
//     the claim with it when the replica is promoted. WAIT (numreplicas,
//     timeout) after a write narrows that window to the writes no replica
//     has acknowledged, but does not close it (Redis can still promote a
//     replica that missed it), and this store does not send it: a claim is
//     one script and its answer.
//
// DynamoDB, by comparison, acknowledges a write once it is durable in more
// than one Availability Zone. Use this store where that difference is
// acceptable, or where Redis is already what the service depends on.
package redisstore
