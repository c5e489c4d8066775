package events

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

// PublishItems publishes the events of items read back from the table, for
// stream batches whose retries ran out (cmd/replay-events). Each item goes
// through Handle's own code as a change whose new image is the item and
// which has no old image, so every upload in a final state yields
// its event again, whether or not it was published before: delivery is at
// least once, and consumers deduplicate on uploadId. An item in another
// state yields nothing.
//
// The events are put in items' order, in calls of up to 10, and as in
// Handle the first failure ends the work: it returns how many of items,
// from the first, were handled (their events put, or none due), and an
// error naming the first item that was not (an item that is not an
// upload's record, or an event PutEvents refused; the Logger has the
// details). All of items were handled exactly when the error is nil.
func (h *Handler) PublishItems(ctx context.Context, items []map[string]types.AttributeValue) (int, error) {
	var batch []pending
	handled, failed := len(items), error(nil)
	for i, item := range items {
		var p pending
		rec, err := recordstore.DecodeItem(h.Schema, item)
		if err != nil {
			err = fmt.Errorf("upload event: new image: %w", err)
		}
		ok := false
		if err == nil {
			p, ok, err = h.shape(nil, &rec)
		}
		if err != nil {
			handled, failed = i, fmt.Errorf("item %d of %d: %w", i+1, len(items), err)
			break
		}
		if ok {
			p.item = i
			batch = append(batch, p)
		}
	}
	if k := h.put(ctx, batch); k >= 0 {
		p := batch[k]
		handled, failed = p.item, fmt.Errorf("item %d of %d: the event of upload %s was not put", p.item+1, len(items), p.id)
	}
	return handled, failed
}
