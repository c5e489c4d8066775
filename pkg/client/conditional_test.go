package client

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/onceupload/onceupload/pkg/api"
)

// A single PUT's URL signs If-None-Match: *, so S3 never overwrites its
// object: a retried PUT whose object is there gets 412, and two PUTs that
// race may get 409 ConditionalRequestConflict. Either way the upload
// completes, with the bytes, through the status route.
func TestConditionalPutAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		fault   func(f *fakeAPI)
		answers []int // of the PUTs the client heard back from
	}{
		{"stored, answer lost: 412 on the retry", func(f *fakeAPI) { f.loseWholeAnswer = 1 }, []int{412}},
		{"stored, answer lost, not recorded yet: 412, then pending until recorded", func(f *fakeAPI) { f.loseWholeAnswer, f.lateRecord = 1, 3 }, []int{412}},
		{"409 ConditionalRequestConflict, then stored", func(f *fakeAPI) { f.conflicts = 2 }, []int{409, 409, 200}},
		{"409 ConditionalRequestConflict, the racing PUT stored it: 412", func(f *fakeAPI) { f.conflicts, f.racerStores = 1, true }, []int{409, 412}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t)
			tc.fault(f)
			data := randomBytes(t, 3000)
			var last int64
			res, err := mpClient(t, f).UploadReader(context.Background(), bytes.NewReader(data), int64(len(data)), UploadInput{
				Filename: "a.bin", PartSize: -1, Progress: func(sent, total int64) { last = sent },
			})
			if err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			answers, lateRecord := f.wholeAnswers, f.lateRecord
			f.mu.Unlock()
			if res.Upload.Status != api.StatusCompleted || !bytes.Equal(f.object(res.Key), data) || len(f.creates) != 1 {
				t.Fatalf("upload %+v after %d creates; want completed with the bytes, one create", res.Upload, len(f.creates))
			}
			if !slices.Equal(answers, tc.answers) || lateRecord != 0 {
				t.Errorf("PUTs answered %v, %d pending status answers left; want %v, none left", answers, lateRecord, tc.answers)
			}
			if last != int64(len(data)) {
				t.Errorf("progress ended at %d of %d", last, len(data))
			}
		})
	}
}

// The API's 429 too_many_uploads is final, whatever its Retry-After: one
// create, no wait, and the error carries the code. Any other 429 is still
// retried.
func TestTooManyUploadsIsNotRetried(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.tooManyUploads = true
	var waits []time.Duration
	c, err := New(f.srv.URL, func(o *Options) {
		o.MaxAttempts = 5 // were it retried, it would fail soon
		o.sleep = func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return ctx.Err() }
	})
	if err != nil {
		t.Fatal(err)
	}
	data := randomBytes(t, 3*testPart)
	_, err = c.UploadReader(context.Background(), bytes.NewReader(data), int64(len(data)), UploadInput{Filename: "a.bin", PartSize: testPart})
	var e *Error
	if !errors.As(err, &e) || e.Op != "create" || e.StatusCode != http.StatusTooManyRequests || e.Code != CodeTooManyUploads || e.Attempts != 1 || e.Exhausted || e.Message == "" {
		t.Fatalf("err = %#v; want create's 429 %s after one attempt", err, CodeTooManyUploads)
	}
	if len(f.creates) != 1 || len(waits) != 0 || len(f.signed) != 0 {
		t.Errorf("%d creates, waits %v, %d signs; want one create and nothing else", len(f.creates), waits, len(f.signed))
	}

	s := &script{answers: []func(http.ResponseWriter){
		status(429, map[string]string{"Retry-After": "1"}, `{"error":"slow_down","message":"x"}`),
		status(201, nil, created),
	}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	other, _ := testClient(t, srv.URL)
	if _, err := other.Create(context.Background(), "key-0123456789abcdef", req); err != nil || len(s.keys) != 2 {
		t.Errorf("another 429: %v after %d requests; want success on the retry", err, len(s.keys))
	}
}

// Part PUTs sign no If-None-Match (S3 takes a part again; Complete uses
// the last one), so nothing changes for them: a part's 412 is an error,
// not retried, like any other 4xx, and never taken for a stored part.
func TestPart412IsAnError(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.refuse[2] = http.StatusPreconditionFailed
	data := randomBytes(t, 3*testPart)
	_, err := mpClient(t, f).UploadReader(context.Background(), bytes.NewReader(data), int64(len(data)), UploadInput{Filename: "a.bin", PartSize: testPart, Parallel: 1})
	var e *Error
	if !errors.As(err, &e) || e.Op != "put part 2" || e.StatusCode != http.StatusPreconditionFailed || e.Attempts != 1 {
		t.Fatalf("err = %v; want part 2's 412, after one attempt", err)
	}
	if f.completes != 0 {
		t.Errorf("%d completes; want none", f.completes)
	}
}
