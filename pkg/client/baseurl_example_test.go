package client_test

import (
	"fmt"

	"github.com/onceupload/onceupload/pkg/client"
)

// Spellings of one base URL are one API; another host name for the same
// server is another.
func ExampleNormalizeBaseURL() {
	for _, raw := range []string{"http://127.0.0.1:3000", "HTTP://127.0.0.1:3000//", "https://API.example.com:443/v1/", "http://localhost:3000", "127.0.0.1:3000"} {
		norm, err := client.NormalizeBaseURL(raw)
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		fmt.Println(norm)
	}
	// Output:
	// http://127.0.0.1:3000
	// http://127.0.0.1:3000
	// https://api.example.com/v1
	// http://localhost:3000
	// error: client: base URL "127.0.0.1:3000": not an absolute URL (no http:// or https://); want http(s)://host[:port][/path]
}
