package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"

	"github.com/onceupload/onceupload/pkg/api"
)

// This file is the whole job: Upload and UploadReader describe the bytes,
// create the upload and send it in one PUT (the steps of steps.go) or in
// parts (multipart.go).

// UploadInput tunes Upload and UploadReader.
type UploadInput struct {
	// Key is the idempotency key. Defaults to a new one; pass a stored key
	// to resume an upload after a crash.
	Key string
	// ContentType defaults to the type of the name's extension (the path's
	// for Upload, Filename's for UploadReader), else one sniffed from the
	// first 512 bytes.
	ContentType string
	// Filename is the name the upload is stored under. Upload defaults it
	// to the file's base name; UploadReader needs it.
	Filename string
	// PartSize makes the upload multipart, in parts of this many bytes
	// (api.MinPartSize to api.MaxPartSize, at most api.MaxParts parts). 0
	// picks PartSizeFor(size): parts from MultipartThreshold up, one PUT
	// below. Negative forces one PUT (S3 takes at most 5 GiB so). Resuming
	// needs the part size of the first attempt, which is part of what the
	// key stands for.
	PartSize int64
	// Parallel is how many parts are sent at once. Defaults to
	// DefaultParallel.
	Parallel int
	// Progress reports the bytes sent out of the total. For one PUT it is
	// the current attempt's bytes. For parts it is what S3 acknowledged
	// plus what the attempts in flight sent so far: it steps back when an
	// attempt fails, never below what S3 acknowledged, and is called one
	// call at a time. RateLimit caps the sending rate (bytes per second
	// over all parts, 0 for none).
	Progress  func(sent, total int64)
	RateLimit int64
	// OnCreated is called once the server holds the key, with the key and
	// the upload (for example to persist the key, upload id and part size
	// before sending bytes).
	OnCreated func(key string, u *api.Upload)
	// OnCheck is called when S3 already holds parts of an upload in parts
	// (a resumed upload, or a completed one: all its parts), before they
	// are read from the file to check that they are the file's: how many,
	// and their bytes.
	OnCheck func(partsHeld int, bytesHeld int64)
	// OnResume is called, before any byte is sent, when S3 already holds
	// parts of an upload in parts (a resumed upload) and they were found to
	// be the file's: how many of how many, and their bytes of the total.
	// Progress then starts from bytesHeld.
	OnResume func(partsHeld, parts int, bytesHeld, total int64)
	// OnCompleting is called when every byte is in S3 and the client asks
	// the server to complete the upload (in parts) or waits for it to
	// record the object (one PUT). It may be called again if S3 turns out
	// to lack parts.
	OnCompleting func()
	// OnStored is called each time S3 confirms bytes of the upload, with
	// the parts and bytes it holds so far: for an upload in parts, once
	// with the parts found held at a resume (if any), then as each part's
	// PUT is answered 2xx (one call at a time; it may count down if S3
	// turns out to lack parts at completion); for one PUT, once its PUT is
	// answered (1 part, every byte). What it last said is what S3 holds
	// when an upload fails or is interrupted, and what a rerun with the key
	// need not send again. (Progress also counts the bytes of the attempts
	// in flight, which S3 does not hold until they are answered.)
	OnStored func(parts int, bytes int64)
}

// Result is a finished upload.
type Result struct {
	Upload api.Upload
	Key    string
	// Replayed is true when the server already knew the key.
	Replayed bool
	// For an upload in parts: the parts S3 already held when this call
	// began (a resumed upload) and the parts this call sent.
	PartsHeld, PartsSent int
	// Put is how the PUT of an upload in one PUT ended: PutStored (this
	// call sent the file), PutAlreadyStored (S3 held it already, stored by
	// an earlier attempt or run), or 0 when no PUT was made (the create
	// answered with the upload completed already, or it is in parts).
	Put PutOutcome
}

// CodeUploadAborted is the Error.Code of an Upload whose key belongs to an
// upload that was aborted: the key cannot store the file any more.
const CodeUploadAborted = "upload_aborted"

// Upload does the whole job for the file at path: size and SHA-256,
// create (one key for every attempt), PUT, wait for completion. A file of
// MultipartThreshold bytes or more goes up in parts, Parallel at a time,
// starting at once: each part is hashed just before it is sent, with no
// pass over the whole file first, and Complete declares every part's
// SHA-256 (the completed upload has no whole-file sha256, but S3's
// compositeSha256, checked against the file's parts). Given the key of an
// unfinished upload in parts, it checks the parts S3 holds against the
// file and sends only the others; of a completed one, its compositeSha256
// against the file's parts (hashed, nothing sent). A
// file that changes while it is sent in parts is not completed
// (CodeFileChanged). It is UploadReader on the open file, named by its base
// name unless in.Filename says otherwise.
func (c *Client) Upload(ctx context.Context, path string, in UploadInput) (*Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if in.Filename == "" {
		in.Filename = filepath.Base(path)
	}
	// Parts are read as they are sent, not in one pass first: the file
	// must not change meanwhile, or the object would mix two versions of
	// it (each part is checked by S3 against its own SHA-256 only).
	changed := func() error {
		now, err := f.Stat()
		if err != nil {
			return err
		}
		if now.Size() != info.Size() || !now.ModTime().Equal(info.ModTime()) {
			return &Error{Op: "upload", Code: CodeFileChanged, Message: path + " changed while it was being sent (its size or modification time); the upload was not completed"}
		}
		return nil
	}
	return c.upload(ctx, f, info.Size(), path, in, changed)
}

// UploadReader is Upload for the first size bytes of r, which need not be
// a file on disk: a bytes.Reader over data made in memory, an
// io.SectionReader over a piece of a larger file, a reader of ranges of a
// remote object. in.Filename names the upload and is required.
//
// r is read from more than once (for one PUT, a pass for the SHA-256, then
// the bytes to send; for parts, each part to hash it, then to send it; again
// on a retry), by several goroutines at once for an upload in parts, as
// io.ReaderAt allows; it must give the same bytes every time.
// Resuming works as for a file: pass the key (and part size) of the
// unfinished upload, and only the parts S3 lacks are sent.
func (c *Client) UploadReader(ctx context.Context, r io.ReaderAt, size int64, in UploadInput) (*Result, error) {
	switch {
	case r == nil:
		return nil, errors.New("client: UploadReader: the reader is nil")
	case size < 0:
		return nil, fmt.Errorf("client: UploadReader: size %d", size)
	case in.Filename == "":
		return nil, errors.New("client: UploadReader: UploadInput.Filename is required (a reader has no name)")
	}
	return c.upload(ctx, r, size, in.Filename, in, nil)
}

// upload is Upload and UploadReader once they have size bytes of r and a
// name: in.Filename, or for Upload the path (which errors name, and whose
// extension gives the content type).
//
// changed, if not nil, says whether the file changed since it was opened:
// an upload in parts asks it before completing.
func (c *Client) upload(ctx context.Context, r io.ReaderAt, size int64, name string, in UploadInput, changed func() error) (*Result, error) {
	if c.opts.Deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.Deadline)
		defer cancel()
	}
	partSize := in.PartSize
	if partSize == 0 {
		partSize = PartSizeFor(size)
	}
	req := api.CreateRequest{Filename: in.Filename, ContentType: in.ContentType}
	if req.ContentType == "" {
		var err error
		if req.ContentType, err = DetectContentType(io.NewSectionReader(r, 0, size), name); err != nil {
			return nil, err
		}
	}
	key := in.Key
	if key == "" {
		key = NewKey()
	}
	if partSize > 0 {
		// Refused before anything is sent.
		if n := api.PartCount(size, partSize); n > api.MaxParts {
			return nil, fmt.Errorf("%s: %d parts of %d bytes; at most %d (use a larger part size)", name, n, partSize, api.MaxParts)
		}
		// Bytes that end before size (a reader shorter than said) are
		// refused before the create, by their last byte.
		if k, err := r.ReadAt(make([]byte, 1), size-1); k != 1 {
			if err == nil || err == io.EOF {
				return nil, fmt.Errorf("%s: %d bytes to upload, but fewer could be read", name, size)
			}
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		// No pass over the bytes first: the create declares no whole-file
		// SHA-256 (S3 cannot check one for an object in parts), each part
		// is hashed just before it is sent, and Complete declares them all.
		req.Size, req.PartSize = size, partSize
		res, created, err := c.create(ctx, key, req, in)
		if err != nil {
			return nil, err
		}
		res, err = c.uploadParts(ctx, r, size, partSize, res, created.Replayed, in, changed)
		if err != nil {
			if e := (*Error)(nil); !errors.As(err, &e) && ctx.Err() == nil {
				err = fmt.Errorf("%s: %w", name, err) // a read error: say of what
			}
			return nil, err
		}
		return res, nil
	}
	n, sum, err := Describe(io.NewSectionReader(r, 0, size))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := sameSize(name, n, size); err != nil {
		return nil, err
	}
	req.Size, req.SHA256 = size, sum
	res, _, err := c.create(ctx, key, req, in)
	if err != nil {
		return nil, err
	}
	// An expired URL is refreshed by replaying the create with the same key.
	for refreshes := 0; res.Upload.Status == api.StatusPending; refreshes++ {
		// Stored or already stored (a 412), the object is there: the
		// status route says when the server has recorded it.
		outcome, err := c.Put(ctx, &res.Upload, r, size, PutOptions{Progress: in.Progress, RateLimit: in.RateLimit})
		if err == nil {
			res.Put = outcome
			if in.OnStored != nil {
				in.OnStored(1, size)
			}
			break
		}
		if !urlExpired(err) || refreshes >= 2 {
			return nil, err
		}
		c.opts.Logger.InfoContext(ctx, "refreshing the upload URL", "upload_id", res.Upload.UploadID)
		created, err := c.Create(ctx, key, req)
		if err != nil {
			return nil, err
		}
		res.Upload = created.Upload
	}
	if res.Upload.Status != api.StatusCompleted {
		if in.OnCompleting != nil {
			in.OnCompleting()
		}
		done, err := c.Wait(ctx, res.Upload.UploadID)
		if err != nil {
			return nil, err
		}
		res.Upload = *done
	}
	return res, nil
}

// sameSize refuses bytes that ran out before the size they were given
// with (a reader shorter than said, a file cut while it was read): the
// create would declare bytes that cannot be sent.
func sameSize(name string, read, size int64) error {
	if read != size {
		return fmt.Errorf("%s: %d bytes to upload, but only %d could be read", name, size, read)
	}
	return nil
}

// create is Upload's create: the result it starts from, told to
// in.OnCreated.
func (c *Client) create(ctx context.Context, key string, req api.CreateRequest, in UploadInput) (*Result, *Created, error) {
	created, err := c.Create(ctx, key, req)
	if err != nil {
		return nil, nil, err
	}
	if in.OnCreated != nil {
		in.OnCreated(key, &created.Upload)
	}
	return &Result{Key: key, Replayed: created.Replayed, Upload: created.Upload}, created, nil
}

// Describe streams r once and returns its size and SHA-256 (hex), in
// constant memory whatever the size.
func Describe(r io.Reader) (int64, string, error) {
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return 0, "", fmt.Errorf("hash: %w", err)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// DetectContentType picks a media type from the file name's extension, else
// from its first 512 bytes.
func DetectContentType(f io.ReaderAt, name string) (string, error) {
	if t := mime.TypeByExtension(filepath.Ext(name)); t != "" {
		return t, nil
	}
	head := make([]byte, 512)
	n, err := f.ReadAt(head, 0)
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return http.DetectContentType(head[:n]), nil
}
