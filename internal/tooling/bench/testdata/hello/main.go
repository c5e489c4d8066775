// Command hello is the smallest Go Lambda function: the cold-start
// baseline that `make bench` measures beside the real bootstrap, so the
// emulator's own start-up is visible.
package main

import "github.com/aws/aws-lambda-go/lambda"

func main() {
	lambda.Start(func() (string, error) { return "hello", nil })
}
