package uploadrecord_test

import (
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/onceupload/onceupload/internal/upload/uploadrecord"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

// uploadID is an upload id as internal/upload makes them: the record's id
// and 32 more hex digits.
const uploadID = "30e408733e1c780a6f068893022f904fd9877ece6d368aac1a6f419ec627c76b"

var (
	sum    = sha256.Sum256([]byte("the file's bytes"))
	sumHex = hex.EncodeToString(sum[:])
)

// A SHA-256 is stored as its 32 bytes, and a former record's hex string
// reads as it was; anything else in its place is an error, not an empty
// sum.
func TestSum256Unmarshal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		av      types.AttributeValue
		want    uploadrecord.Sum256
		wantErr bool
	}{
		{"binary, as stored now", &types.AttributeValueMemberB{Value: sum[:]}, uploadrecord.Sum256(sumHex), false},
		{"a hex string, as a former record holds it", &types.AttributeValueMemberS{Value: sumHex}, uploadrecord.Sum256(sumHex), false},
		{"a number", &types.AttributeValueMemberN{Value: "1"}, "", true},
		{"a list", &types.AttributeValueMemberL{}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got uploadrecord.Sum256
			err := got.UnmarshalDynamoDBAttributeValue(tc.av)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("Unmarshal(%#v) = %q, %v; want %q, error %v", tc.av, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// Only the lower-case hex the API states is stored as bytes; any other
// text is kept as the string it is, so that it reads back unchanged.
func TestSum256Marshal(t *testing.T) {
	upper := strings.ToUpper(sumHex)
	notHex := strings.Repeat("zz", sha256.Size)
	for _, tc := range []struct {
		name string
		sum  uploadrecord.Sum256
		want types.AttributeValue
	}{
		{"lower-case hex", uploadrecord.Sum256(sumHex), &types.AttributeValueMemberB{Value: sum[:]}},
		{"upper-case hex", uploadrecord.Sum256(upper), &types.AttributeValueMemberS{Value: upper}},
		{"64 characters, not hex", uploadrecord.Sum256(notHex), &types.AttributeValueMemberS{Value: notHex}},
		{"too short", "abcd", &types.AttributeValueMemberS{Value: "abcd"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.sum.MarshalDynamoDBAttributeValue()
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Marshal(%q) = %#v, %v; want %#v", tc.sum, got, err, tc.want)
			}
			var back uploadrecord.Sum256
			if err := back.UnmarshalDynamoDBAttributeValue(got); err != nil || back != tc.sum {
				t.Errorf("read back as %q, %v; want %q", back, err, tc.sum)
			}
		})
	}
}

// Decode reads a record of now (the object key derived from key_prefix
// and the upload id, the sum stored as bytes) and a former one (its
// object_key and hex sum as stored), and refuses a record that is not an
// upload's.
func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name          string
		data          any // a record's Data: Fields, or a map for a former record's shape
		wantKey       string
		wantSHA256    string
		wantMultipart bool
		wantErr       string
	}{
		{
			name:    "now: the key is key_prefix and the upload id",
			data:    uploadrecord.Fields{KeyPrefix: "uploads/", Size: 23, SHA256: uploadrecord.Sum256(sumHex)},
			wantKey: "uploads/" + uploadID, wantSHA256: sumHex,
		},
		{
			name:    "now, with no prefix: the key is stored",
			data:    uploadrecord.Fields{ObjectKey: uploadID, Size: 23},
			wantKey: uploadID,
		},
		{
			name:    "now, multipart",
			data:    uploadrecord.Fields{KeyPrefix: "in/", Size: 3 << 20, PartSize: 1 << 20},
			wantKey: "in/" + uploadID, wantMultipart: true,
		},
		{
			name:    "former: object_key and a hex sum, as stored",
			data:    map[string]any{"object_key": "old-prefix/" + uploadID, "size": 23, "sha256": sumHex},
			wantKey: "old-prefix/" + uploadID, wantSHA256: sumHex,
		},
		{
			name:    "a stored object_key wins over key_prefix",
			data:    map[string]any{"object_key": "old-prefix/" + uploadID, "key_prefix": "uploads/", "size": 23},
			wantKey: "old-prefix/" + uploadID,
		},
		{name: "no size: not an upload", data: map[string]any{"key_prefix": "uploads/"}, wantErr: "not an upload"},
		{name: "no key: not an upload", data: map[string]any{"size": 23}, wantErr: "not an upload"},
		{name: "a negative part size: not an upload", data: uploadrecord.Fields{KeyPrefix: "uploads/", Size: 23, PartSize: -1}, wantErr: "not an upload"},
		{name: "another store's record", data: map[string]any{"order": "o-1", "total": 12}, wantErr: "not an upload"},
		{name: "a sha256 that is neither", data: map[string]any{"key_prefix": "uploads/", "size": 23, "sha256": 7}, wantErr: "sha256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := recordstore.NewData(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			got, err := uploadrecord.Decode(recordstore.Record{Record: idempotency.Record{ClaimID: uploadID, State: recordstore.StatePending}, Data: data})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), uploadID) {
					t.Fatalf("Decode = %+v, %v; want an error naming the record and %q", got.Fields, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.ObjectKey != tc.wantKey || string(got.SHA256) != tc.wantSHA256 || got.Multipart() != tc.wantMultipart {
				t.Errorf("Decode: object key %q, sha256 %q, multipart %v; want %q, %q, %v",
					got.ObjectKey, got.SHA256, got.Multipart(), tc.wantKey, tc.wantSHA256, tc.wantMultipart)
			}
			// The pending body states the same key and sum.
			if u := got.Upload(); u.StorageKey != tc.wantKey || u.SHA256 != tc.wantSHA256 || u.UploadID != uploadID {
				t.Errorf("Upload: storageKey %q, sha256 %q, uploadId %q; want %q, %q, %q",
					u.StorageKey, u.SHA256, u.UploadID, tc.wantKey, tc.wantSHA256, uploadID)
			}
		})
	}
}
