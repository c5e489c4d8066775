package client

import (
	"bytes"
	"context"
	"slices"
	"testing"
)

type storedCall struct {
	parts int
	bytes int64
}

// OnStored says what S3 holds, as S3 answers: for parts, the parts held at
// a resume, then each part answered, never a part in flight; so when an
// upload fails, its last call is what a rerun need not send.
func TestOnStoredSaysWhatS3Holds(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	c := mpClient(t, f)
	data := randomBytes(t, 10*testPart+5) // 11 parts
	var calls []storedCall
	in := UploadInput{Key: NewKey(), Filename: "held.bin", PartSize: testPart, Parallel: 1,
		OnStored: func(parts int, bytes int64) { calls = append(calls, storedCall{parts, bytes}) }}
	f.refuse[4] = 400
	if _, err := c.UploadReader(context.Background(), bytes.NewReader(data), int64(len(data)), in); err == nil {
		t.Fatal("first run: no error")
	}
	if want := []storedCall{{1, testPart}, {2, 2 * testPart}, {3, 3 * testPart}}; !slices.Equal(calls, want) {
		t.Errorf("first run: OnStored %v; want %v (part 4 refused)", calls, want)
	}
	f.mu.Lock()
	delete(f.refuse, 4)
	f.mu.Unlock()
	calls = nil
	if _, err := c.UploadReader(context.Background(), bytes.NewReader(data), int64(len(data)), in); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 9 || calls[0] != (storedCall{3, 3 * testPart}) || calls[8] != (storedCall{11, int64(len(data))}) {
		t.Errorf("resumed: OnStored %v; want the 3 parts held, then one call per part up to 11 and every byte", calls)
	}
}

// Result.Put tells how a single PUT ended, so that a caller can say
// whether this call sent the file: stored by it, held by S3 already (an
// earlier attempt's answer lost), or no PUT at all (the create replayed a
// completed upload). OnStored hears of the PUT once it is answered.
func TestResultSaysWhatThePutDid(t *testing.T) {
	t.Parallel()
	data := randomBytes(t, 1000)
	for _, tc := range []struct {
		name       string
		loseAnswer int
		want       PutOutcome
	}{
		{"stored", 0, PutStored},
		{"stored already", 1, PutAlreadyStored},
	} {
		f := newFakeAPI(t)
		f.loseWholeAnswer = tc.loseAnswer
		c := mpClient(t, f)
		var calls []storedCall
		in := UploadInput{Key: NewKey(), Filename: "one.bin", PartSize: -1, OnStored: func(parts int, bytes int64) { calls = append(calls, storedCall{parts, bytes}) }}
		res, err := c.UploadReader(context.Background(), bytes.NewReader(data), int64(len(data)), in)
		if err != nil || res.Put != tc.want || res.Replayed || !slices.Equal(calls, []storedCall{{1, 1000}}) {
			t.Errorf("%s: %v, Put %v, replayed %v, OnStored %v; want %v, not replayed, told once of 1000 bytes", tc.name, err, res.Put, res.Replayed, calls, tc.want)
		}
		calls = nil
		again, err := c.UploadReader(context.Background(), bytes.NewReader(data), int64(len(data)), in)
		if err != nil || again.Put != 0 || !again.Replayed || len(calls) != 0 {
			t.Errorf("%s, again: %v, Put %v, replayed %v, OnStored %v; want no PUT, replayed", tc.name, err, again.Put, again.Replayed, calls)
		}
	}
}
