package devstack

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// versityEvent is Versity Gateway's webhook payload, and MinIO's. It
// resembles AWS's S3 event but differs. Versity Gateway's: eventName
// carries an "s3:" prefix, the key is not URL-encoded, the ETag keeps its
// quotes, the bucket ARN holds the key, request ids are empty, and an
// empty lifecycleRestorationExpiryTime breaks decoding into
// events.S3Event; it also sends an s3:TestEvent first. MinIO's
// (eventSource "minio:s3"): the "s3:" prefix too, and the key
// query-escaped whole, '/' as %2F (AWS keeps the '/').
type versityEvent struct {
	Event   string `json:"Event"` // "s3:TestEvent" for the start-up probe
	Records []struct {
		EventSource  string `json:"eventSource"`
		EventVersion string `json:"eventVersion"`
		AWSRegion    string `json:"awsRegion"`
		EventTime    string `json:"eventTime"`
		EventName    string `json:"eventName"`
		Request      struct {
			SourceIP string `json:"sourceIPAddress"`
		} `json:"requestParameters"`
		S3 struct {
			ConfigurationID string `json:"configurationId"`
			Bucket          struct {
				Name string `json:"name"`
			} `json:"bucket"`
			Object struct {
				Key       string  `json:"key"`
				Size      int64   `json:"size"`
				ETag      string  `json:"eTag"`
				VersionID *string `json:"versionId"`
				Sequencer string  `json:"sequencer"`
			} `json:"object"`
		} `json:"s3"`
	} `json:"Records"`
}

// S3Notification is an S3 event notification in exactly the JSON shape AWS
// delivers to Lambda (events.S3Event would add fields AWS never sends, such
// as urlDecodedKey).
type S3Notification struct {
	Records []S3NotificationRecord `json:"Records"`
}

// S3NotificationRecord is one record of an S3Notification.
type S3NotificationRecord struct {
	EventVersion      string            `json:"eventVersion"`
	EventSource       string            `json:"eventSource"`
	AWSRegion         string            `json:"awsRegion"`
	EventTime         string            `json:"eventTime"`
	EventName         string            `json:"eventName"`
	UserIdentity      principal         `json:"userIdentity"`
	RequestParameters map[string]string `json:"requestParameters"`
	ResponseElements  map[string]string `json:"responseElements"`
	S3                struct {
		SchemaVersion   string `json:"s3SchemaVersion"`
		ConfigurationID string `json:"configurationId"`
		Bucket          struct {
			Name          string    `json:"name"`
			OwnerIdentity principal `json:"ownerIdentity"`
			ARN           string    `json:"arn"`
		} `json:"bucket"`
		Object struct {
			Key       string `json:"key"`
			Size      int64  `json:"size"`
			ETag      string `json:"eTag"`
			VersionID string `json:"versionId,omitempty"`
			Sequencer string `json:"sequencer"`
		} `json:"object"`
	} `json:"s3"`
}

// minioEventSource is the eventSource of MinIO's records (AWS's: "aws:s3").
const minioEventSource = "minio:s3"

type principal struct {
	PrincipalID string `json:"principalId"`
}

// TranslateS3Event turns a Versity Gateway or MinIO notification into the
// event AWS would deliver to Lambda. It returns ok=false for the test
// event.
func TranslateS3Event(payload []byte, now time.Time, newID func() string) (S3Notification, bool, error) {
	var in versityEvent
	if err := json.Unmarshal(payload, &in); err != nil {
		return S3Notification{}, false, fmt.Errorf("decode S3 notification: %w", err)
	}
	if in.Event == "s3:TestEvent" || len(in.Records) == 0 {
		return S3Notification{}, false, nil
	}
	var out S3Notification
	for _, r := range in.Records {
		// Lambda decodes eventTime as RFC 3339, whose years have four
		// digits: a time whose UTC form falls outside them would make the
		// whole event undecodable.
		t, err := time.Parse(time.RFC3339Nano, r.EventTime)
		if y := t.UTC().Year(); err != nil || y < 0 || y > 9999 {
			t = now
		}
		region := r.AWSRegion
		if region == "" {
			region = "us-east-1"
		}
		rec := S3NotificationRecord{
			EventVersion: "2.1", EventSource: "aws:s3", AWSRegion: region,
			EventTime:         t.UTC().Format("2006-01-02T15:04:05.000Z"),
			EventName:         strings.TrimPrefix(r.EventName, "s3:"),
			UserIdentity:      principal{"AWS:" + localAccountID},
			RequestParameters: map[string]string{"sourceIPAddress": r.Request.SourceIP},
			ResponseElements:  map[string]string{"x-amz-request-id": newID(), "x-amz-id-2": newID()},
		}
		rec.S3.SchemaVersion, rec.S3.ConfigurationID = "1.0", r.S3.ConfigurationID
		rec.S3.Bucket.Name = r.S3.Bucket.Name
		rec.S3.Bucket.OwnerIdentity = principal{localAccountID}
		rec.S3.Bucket.ARN = "arn:aws:s3:::" + r.S3.Bucket.Name
		key := r.S3.Object.Key
		if r.EventSource == minioEventSource {
			if key, err = url.QueryUnescape(key); err != nil {
				return S3Notification{}, false, fmt.Errorf("decode S3 notification: key %q: %w", r.S3.Object.Key, err)
			}
		}
		o := &rec.S3.Object
		o.Key, o.Size, o.Sequencer = EncodeS3EventKey(key), r.S3.Object.Size, r.S3.Object.Sequencer
		o.ETag = strings.Trim(r.S3.Object.ETag, `"`)
		if r.S3.Object.VersionID != nil {
			o.VersionID = *r.S3.Object.VersionID
		}
		out.Records = append(out.Records, rec)
	}
	return out, true, nil
}

// EncodeS3EventKey encodes an object key as S3 notifications do: form
// encoding (space as '+'; everything but letters, digits and ".-*_"
// percent-encoded as UTF-8), with '/' kept.
func EncodeS3EventKey(key string) string {
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte(".-*_/", c) >= 0:
			b.WriteByte(c)
		case c == ' ':
			b.WriteByte('+')
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
