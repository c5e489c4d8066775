package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/onceupload/onceupload/pkg/client"
)

// Upload a file, retrying safely. The key is minted once for this logical
// upload; keep it (for example on disk) to resume after a crash.
func ExampleClient_Upload() {
	c, err := client.New("http://127.0.0.1:3000", func(o *client.Options) {
		o.Token = func(context.Context) (string, error) { return "a JWT", nil }
	})
	if err != nil {
		log.Fatal(err)
	}
	key := client.NewKey()
	res, err := c.Upload(context.Background(), "photo.jpg", client.UploadInput{Key: key})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Upload.Status, res.Upload.UploadID)
}

// Full jitter: a uniform wait between zero and the capped exponential.
func ExampleFullJitter() {
	for attempt := range 5 {
		fmt.Println(client.FullJitter(attempt, 100*time.Millisecond, time.Second, 0.5))
	}
	// Output:
	// 50ms
	// 100ms
	// 200ms
	// 400ms
	// 500ms
}
