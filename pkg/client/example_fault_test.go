package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/onceupload/onceupload/pkg/client"
)

// A failure that waiting cannot fix ends the upload after one attempt, and
// says why: here nothing listens where the base URL points, and the API
// has never answered, so the URL is most likely wrong.
func ExampleErrConnectionRefused() {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close() // a port where nothing listens

	c, _ := client.New("http://" + addr)
	data := []byte("hello")
	_, err := c.UploadReader(context.Background(), bytes.NewReader(data), int64(len(data)), client.UploadInput{Filename: "hello.txt"})
	var e *client.Error
	if errors.As(err, &e) && e.Fault != nil && !e.Exhausted {
		fmt.Printf("ended at once (%d attempt): %v\n", e.Attempts, e.Fault)
	}
	switch {
	case errors.Is(err, client.ErrConnectionRefused), errors.Is(err, client.ErrNoSuchHost):
		fmt.Println("check the host and port of the base URL")
	case errors.Is(err, client.ErrServerSpeaksHTTP), errors.Is(err, client.ErrServerSpeaksHTTPS):
		fmt.Println("check its scheme: http:// or https://")
	case errors.Is(err, client.ErrCertificate):
		fmt.Println("check the server's certificate:", e.FaultSentence())
	}
	// Output:
	// ended at once (1 attempt): connection refused
	// check the host and port of the base URL
}
