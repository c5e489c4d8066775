package idempotency

import (
	"container/list"
	"sync"
	"time"
)

// DefaultLocalCacheMaxItems is how many records HandlerOptions.UseLocalCache
// keeps unless LocalCacheMaxItems says otherwise: Powertools for Python's
// default local_cache_max_items.
const DefaultLocalCacheMaxItems = 256

// localCache keeps the completed records of one wrapped handler, the least
// recently used evicted first. Only completed records are safe to keep: a
// live completed record never changes in the store (no claim takes it over
// before it expires), whereas an in-progress one may be completed, released
// or taken over at any moment. A nil *localCache keeps nothing.
type localCache struct {
	mu   sync.Mutex
	max  int
	lru  *list.List // of Record, the most recently used in front
	byID map[ID]*list.Element
}

func newLocalCache(max int) *localCache {
	if max <= 0 {
		max = DefaultLocalCacheMaxItems
	}
	return &localCache{max: max, lru: list.New(), byID: make(map[ID]*list.Element)}
}

// get returns id's record unless it has expired at now, as a store would
// judge it; an expired record is dropped.
func (c *localCache) get(id ID, now time.Time) (Record, bool) {
	if c == nil {
		return Record{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byID[id]
	if !ok {
		return Record{}, false
	}
	rec := e.Value.(Record)
	if rec.Expired(now) {
		c.lru.Remove(e)
		delete(c.byID, id)
		return Record{}, false
	}
	c.lru.MoveToFront(e)
	return rec, true
}

// put keeps rec if it is completed, evicting the least recently used
// record past the bound.
func (c *localCache) put(rec Record) {
	if c == nil || rec.State != StateCompleted {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[rec.ID]; ok {
		e.Value = rec
		c.lru.MoveToFront(e)
		return
	}
	c.byID[rec.ID] = c.lru.PushFront(rec)
	if c.lru.Len() > c.max {
		oldest := c.lru.Back()
		c.lru.Remove(oldest)
		delete(c.byID, oldest.Value.(Record).ID)
	}
}
