package awslite

import "github.com/aws/aws-sdk-go-v2/aws"

// RetryerOf is the retryer d uses, for tests of which one it chose.
func RetryerOf(d *DynamoDB) aws.Retryer { return d.c.retryer }
