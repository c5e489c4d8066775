package client_test

import (
	"bytes"
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

// Upload bytes that are not a file on disk: anything with ReadAt (here a
// report made in memory) and its size. Filename names the upload;
// ContentType, left out, would come from its extension or else the bytes.
func ExampleClient_UploadReader() {
	srv := startExampleAPI() // stands in for your API's URL
	defer srv.Close()

	c, err := client.New(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	report := []byte("date,visits\n2026-11-29,1042\n")
	res, err := c.UploadReader(context.Background(), bytes.NewReader(report), int64(len(report)), client.UploadInput{
		Key:         client.NewKey(), // keep it to resume after a crash
		Filename:    "visits.csv",
		ContentType: "text/csv",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Upload.Status, res.Upload.Filename, res.Upload.ContentType, res.Upload.Bytes)
	// Output: completed visits.csv text/csv 28
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

// The part size Upload picks: one PUT below 64 MiB, then 8 MiB parts, then
// parts large enough that no file needs more than 10,000.
func ExamplePartSizeFor() {
	for _, size := range []int64{10 << 20, 64 << 20, 1 << 30, 100 << 30, 1 << 40} {
		fmt.Printf("%d MiB: %d MiB parts\n", size>>20, client.PartSizeFor(size)>>20)
	}
	// Output:
	// 10 MiB: 0 MiB parts
	// 64 MiB: 8 MiB parts
	// 1024 MiB: 8 MiB parts
	// 102400 MiB: 11 MiB parts
	// 1048576 MiB: 105 MiB parts
}
