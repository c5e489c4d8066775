// Package sqsdrain reads a queue to its end: the receive loop that the
// replay commands share (cmd/replay-failed handles each message as it
// comes, cmd/replay-events receives every one before handling any), and
// the calls that settle a message received.
package sqsdrain

import (
	"context"
	"iter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// API is the part of *sqs.Client a Reader uses.
type API interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

var _ API = (*sqs.Client)(nil)

// Reader reads one queue.
type Reader struct {
	Client API
	URL    string
	// Visibility is how long a message received stays hidden from other
	// readers, whole seconds: long enough for the handling of every
	// message it is received with, or a delete may come too late.
	Visibility time.Duration
}

// maxBatch is the most messages one ReceiveMessage returns.
const maxBatch = 10

// Messages receives up to limit messages, each yielded once, until a
// receive (a one-second long poll) brings none not yielded already: a
// message left in the queue and received again in the same run is not
// handed out twice. A failed receive is yielded as the error, and ends the
// sequence.
func (r *Reader) Messages(ctx context.Context, limit int) iter.Seq2[types.Message, error] {
	return func(yield func(types.Message, error) bool) {
		seen := map[string]bool{}
		for len(seen) < limit {
			out, err := r.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
				QueueUrl: &r.URL, MaxNumberOfMessages: int32(min(maxBatch, limit-len(seen))),
				WaitTimeSeconds: 1, VisibilityTimeout: int32(r.Visibility / time.Second),
			})
			if err != nil {
				yield(types.Message{}, err)
				return
			}
			fresh := 0
			for _, m := range out.Messages {
				id := aws.ToString(m.MessageId)
				if seen[id] {
					continue
				}
				seen[id], fresh = true, fresh+1
				if !yield(m, nil) {
					return
				}
			}
			if fresh == 0 {
				return
			}
		}
	}
}

// Delete removes a message received: it was handled.
func (r *Reader) Delete(ctx context.Context, m types.Message) error {
	_, err := r.Client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &r.URL, ReceiptHandle: m.ReceiptHandle})
	return err
}

// Release makes a message received visible again now, rather than when
// its visibility ends.
func (r *Reader) Release(ctx context.Context, m types.Message) error {
	_, err := r.Client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &r.URL, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
	return err
}
