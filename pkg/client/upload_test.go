package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"testing"

	"github.com/onceupload/onceupload/pkg/api"
)

// onlyReaderAt has ReadAt and nothing else (no Read, Seek or Stat), so a
// test sees that UploadReader needs nothing more.
type onlyReaderAt struct{ b []byte }

func (o onlyReaderAt) ReadAt(p []byte, off int64) (int, error) {
	return bytes.NewReader(o.b).ReadAt(p, off)
}

// Bytes that are no file on disk go up as a file does: in one PUT or in
// parts, named by Filename, typed by its extension or by their first bytes.
func TestUploadReader(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		filename string
		size     int
		partSize int64
	}{
		{"one PUT, typed by the extension", "data.json", 1000, 0},
		{"one PUT, typed by its bytes", "data", 1000, 0},
		{"in parts", "data.json", 10*testPart + 5, testPart},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t)
			data := randomBytes(t, tc.size)
			// More bytes than size: only the first size bytes are the upload.
			r := onlyReaderAt{append(bytes.Clone(data), "not these"...)}
			var last int64
			res, err := mpClient(t, f).UploadReader(context.Background(), r, int64(len(data)), UploadInput{
				Filename: tc.filename, PartSize: tc.partSize, Parallel: 3,
				Progress: func(sent, total int64) { last = sent },
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Upload.Status != api.StatusCompleted || !bytes.Equal(f.object(res.Key), data) || last != int64(len(data)) {
				t.Fatalf("status %s, progress %d of %d; the stored object is not the bytes", res.Upload.Status, last, len(data))
			}
			want := mime.TypeByExtension(".json")
			if tc.filename == "data" {
				want = http.DetectContentType(data[:512])
			}
			got := f.creates[0]
			wantSum := hexSum(data) // one PUT: S3 checks it; in parts: none, no pass over the bytes first
			if tc.partSize > 0 {
				wantSum = ""
			}
			if got.Filename != tc.filename || got.ContentType != want || got.Size != int64(len(data)) || got.SHA256 != wantSum || got.PartSize != tc.partSize {
				t.Errorf("created %+v; want %s, %s, %d bytes, sha256 %q, part size %d", got, tc.filename, want, len(data), wantSum, tc.partSize)
			}
		})
	}
}

// Upload is UploadReader on the file: for the same bytes and name they ask
// for the same upload.
func TestUploadIsUploadReaderOnTheFile(t *testing.T) {
	t.Parallel()
	for _, partSize := range []int64{-1, testPart} {
		f := newFakeAPI(t)
		c := mpClient(t, f)
		data := randomBytes(t, 3*testPart+7)
		if _, err := c.Upload(context.Background(), tempFile(t, data), UploadInput{PartSize: partSize}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.UploadReader(context.Background(), bytes.NewReader(data), int64(len(data)), UploadInput{Filename: "big.bin", PartSize: partSize}); err != nil {
			t.Fatal(err)
		}
		if len(f.creates) != 2 || f.creates[0] != f.creates[1] {
			t.Errorf("part size %d: Upload created %+v, UploadReader %+v; want the same", partSize, f.creates[0], f.creates[1])
		}
	}
}

// What cannot be uploaded is refused before any request: no name, no
// reader, a negative size, and a reader shorter than the size it came with.
func TestUploadReaderRefusesBadInput(t *testing.T) {
	t.Parallel()
	data := randomBytes(t, 2*testPart)
	for _, tc := range []struct {
		name string
		r    io.ReaderAt
		size int64
		in   UploadInput
		want string
	}{
		{"no filename", bytes.NewReader(data), int64(len(data)), UploadInput{}, "Filename is required"},
		{"no reader", nil, 10, UploadInput{Filename: "a"}, "reader is nil"},
		{"a negative size", bytes.NewReader(data), -1, UploadInput{Filename: "a"}, "size -1"},
		{"short, one PUT", bytes.NewReader(data), int64(len(data)) + 1, UploadInput{Filename: "a"}, "only 131072 could be read"},
		{"short, in parts", bytes.NewReader(data), int64(len(data)) + 1, UploadInput{Filename: "a", PartSize: testPart}, "131073 bytes to upload, but fewer could be read"},
	} {
		f := newFakeAPI(t)
		_, err := mpClient(t, f).UploadReader(context.Background(), tc.r, tc.size, tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) || len(f.creates) != 0 {
			t.Errorf("%s: err %v after %d creates; want %q before any", tc.name, err, len(f.creates), tc.want)
		}
	}
}

// A reader's upload resumes as a file's does: with the key of a run that
// stopped, only the parts S3 lacks are sent; once completed, nothing is.
func TestUploadReaderResumes(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	c := mpClient(t, f)
	data := randomBytes(t, 10*testPart+5) // 11 parts
	in := UploadInput{Key: NewKey(), Filename: "resumed.bin", PartSize: testPart, Parallel: 1}
	f.refuse[4] = 400 // parts 1 to 3 are stored, then the run fails
	_, err := c.UploadReader(context.Background(), bytes.NewReader(data), int64(len(data)), in)
	var e *Error
	if !errors.As(err, &e) || e.Op != "put part 4" {
		t.Fatalf("first run: %v, want part 4 refused", err)
	}
	f.mu.Lock()
	delete(f.refuse, 4)
	before := f.received
	f.mu.Unlock()

	res, err := c.UploadReader(context.Background(), bytes.NewReader(data), int64(len(data)), in)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Replayed || res.PartsHeld != 3 || res.PartsSent != 8 || f.received-before != int64(len(data))-3*testPart || !bytes.Equal(f.object(in.Key), data) {
		t.Fatalf("resumed: replayed %v, %d parts held, %d sent, %d bytes sent; want 3 held, 8 sent, the rest of the bytes",
			res.Replayed, res.PartsHeld, res.PartsSent, f.received-before)
	}
	before = f.received
	again, err := c.UploadReader(context.Background(), bytes.NewReader(data), int64(len(data)), in)
	if err != nil || again.Upload.Status != api.StatusCompleted || again.PartsSent != 0 || f.received != before {
		t.Errorf("again: %+v, %v, %d bytes sent; want completed, nothing sent", again, err, f.received-before)
	}
}
