package services

import (
	"encoding/base64"
	"math/rand/v2"
	"strings"
)

// LambdaSessionTokenLength is the length of the session token in a Lambda
// function's credentials (AWS_SESSION_TOKEN): they vary by region and role
// and run to about a thousand base64 characters; 1,100 is a typical one,
// rounded up rather than down. Local credentials have
// none, so every presigned URL the local servers see is shorter than on
// AWS by the token's URL-encoded form; records and answers that hold a URL
// are measured with this token as well (make bench, the record's tests).
const LambdaSessionTokenLength = 1100

// LambdaSessionToken is a token of Lambda's length and alphabet: the "IQoJ"
// prefix its tokens share, then base64 of fixed pseudo-random bytes, so it
// carries the '+', '/' and '=' that URL-encoding widens, the same in every
// run.
func LambdaSessionToken() string {
	r := rand.New(rand.NewPCG(1, 2))
	raw := make([]byte, LambdaSessionTokenLength)
	for i := range raw {
		raw[i] = byte(r.Uint32())
	}
	tok := "IQoJb3JpZ2luX2VjE" + base64.StdEncoding.EncodeToString(raw)
	return strings.TrimRight(tok[:LambdaSessionTokenLength-1], "=") + "="
}
