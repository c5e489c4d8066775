package sqsdrain

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// fakeQueue answers each ReceiveMessage with the next of batches (message
// ids; a message's receipt handle is "handle-" and its id), then with
// fail if set, else with no message; it records what it was asked.
type fakeQueue struct {
	batches           [][]string
	fail              error
	receives          []sqs.ReceiveMessageInput
	deleted, released []string // "URL handle", and the visibility asked for
}

func (f *fakeQueue) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.receives = append(f.receives, *in)
	if len(f.batches) == 0 {
		if f.fail != nil {
			return nil, f.fail
		}
		return &sqs.ReceiveMessageOutput{}, nil
	}
	out := &sqs.ReceiveMessageOutput{}
	for _, id := range f.batches[0] {
		out.Messages = append(out.Messages, types.Message{MessageId: aws.String(id), ReceiptHandle: aws.String("handle-" + id)})
	}
	f.batches = f.batches[1:]
	return out, nil
}

func (f *fakeQueue) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	f.deleted = append(f.deleted, aws.ToString(in.QueueUrl)+" "+aws.ToString(in.ReceiptHandle))
	return &sqs.DeleteMessageOutput{}, nil
}

func (f *fakeQueue) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	if in.VisibilityTimeout != 0 {
		f.released = append(f.released, "visibility not 0")
	}
	f.released = append(f.released, aws.ToString(in.QueueUrl)+" "+aws.ToString(in.ReceiptHandle))
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

const queueURL = "http://127.0.0.1:1/000000000000/failures"

// Messages yields each message once, up to the limit, and stops at the
// first receive that brings nothing new; each receive long-polls for a
// second, asks for at most what is left of the limit (10 at the most),
// and hides what it gets for the reader's visibility.
func TestMessages(t *testing.T) {
	for _, tc := range []struct {
		name    string
		batches [][]string
		limit   int
		want    []string
		asked   []int32 // MaxNumberOfMessages of each receive
	}{
		{"an empty queue", nil, 5, nil, []int32{5}},
		{"until a receive is empty", [][]string{{"a", "b"}, {"c"}}, 100, []string{"a", "b", "c"}, []int32{10, 10, 10}},
		// A message left in the queue comes back once its visibility ends:
		// a run does not handle it twice, and ends when only such come.
		{"until a receive brings only messages seen", [][]string{{"a", "b"}, {"b", "c"}, {"a", "c"}, {"d"}}, 100, []string{"a", "b", "c"}, []int32{10, 10, 10}},
		{"up to the limit", [][]string{{"a", "b"}, {"c"}, {"d"}}, 3, []string{"a", "b", "c"}, []int32{3, 1}},
		{"ten at a time", [][]string{{"a"}, {"b"}}, 12, []string{"a", "b"}, []int32{10, 10, 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &fakeQueue{batches: tc.batches}
			r := &Reader{Client: q, URL: queueURL, Visibility: 15 * time.Minute}
			var got []string
			for m, err := range r.Messages(context.Background(), tc.limit) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, aws.ToString(m.MessageId))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("messages %q, want %q", got, tc.want)
			}
			var asked []int32
			for _, in := range q.receives {
				asked = append(asked, in.MaxNumberOfMessages)
				if aws.ToString(in.QueueUrl) != queueURL || in.WaitTimeSeconds != 1 || in.VisibilityTimeout != 900 {
					t.Errorf("receive of %q, waiting %d s, hiding for %d s; want %q, 1 s, 900 s", aws.ToString(in.QueueUrl), in.WaitTimeSeconds, in.VisibilityTimeout, queueURL)
				}
			}
			if !slices.Equal(asked, tc.asked) {
				t.Errorf("receives asked for %v messages, want %v", asked, tc.asked)
			}
		})
	}
}

// A failed receive ends the messages with its error, after those received
// before it.
func TestMessagesReceiveFails(t *testing.T) {
	refused := errors.New("AWS.SimpleQueueService.NonExistentQueue")
	q := &fakeQueue{batches: [][]string{{"a"}}, fail: refused}
	r := &Reader{Client: q, URL: queueURL, Visibility: time.Minute}
	var got []string
	var errs []error
	for m, err := range r.Messages(context.Background(), 100) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		got = append(got, aws.ToString(m.MessageId))
	}
	if !slices.Equal(got, []string{"a"}) || len(errs) != 1 || !errors.Is(errs[0], refused) || len(q.receives) != 2 {
		t.Errorf("messages %q, errors %v after %d receives; want [a], then %v, after 2", got, errs, len(q.receives), refused)
	}
}

// A caller that stops ranging stops the receiving: the messages not
// yielded stay hidden only for their visibility, and no more are taken.
func TestMessagesStopsWhenTheCallerDoes(t *testing.T) {
	q := &fakeQueue{batches: [][]string{{"a", "b"}, {"c"}}}
	r := &Reader{Client: q, URL: queueURL, Visibility: time.Minute}
	var got []string
	for m := range r.Messages(context.Background(), 100) {
		got = append(got, aws.ToString(m.MessageId))
		break
	}
	if !slices.Equal(got, []string{"a"}) || len(q.receives) != 1 {
		t.Errorf("messages %q after %d receives, want [a] after 1", got, len(q.receives))
	}
}

// Delete and Release name the message by its receipt handle on the
// reader's queue; Release shows it again at once.
func TestDeleteAndRelease(t *testing.T) {
	q := &fakeQueue{}
	r := &Reader{Client: q, URL: queueURL, Visibility: time.Minute}
	ctx := context.Background()
	if err := r.Delete(ctx, types.Message{MessageId: aws.String("a"), ReceiptHandle: aws.String("handle-a")}); err != nil {
		t.Fatal(err)
	}
	if err := r.Release(ctx, types.Message{MessageId: aws.String("b"), ReceiptHandle: aws.String("handle-b")}); err != nil {
		t.Fatal(err)
	}
	if want := []string{queueURL + " handle-a"}; !slices.Equal(q.deleted, want) {
		t.Errorf("deleted %q, want %q", q.deleted, want)
	}
	if want := []string{queueURL + " handle-b"}; !slices.Equal(q.released, want) {
		t.Errorf("released %q, want %q", q.released, want)
	}
}
