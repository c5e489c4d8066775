package awslite_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/onceupload/onceupload/pkg/awslite"
)

// captured is one request as a server saw it.
type captured struct {
	target, contentType string
	signed              []string
	body                any
}

// The store's four operations go out as the SDK's DynamoDB client sends
// them: the same target, content type, signed headers and JSON body.
func TestDynamoSendsWhatTheSDKDoes(t *testing.T) {
	var got []captured
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body any
		_ = json.Unmarshal(raw, &body)
		got = append(got, captured{r.Header.Get("X-Amz-Target"), r.Header.Get("Content-Type"), signedHeaders(r.Header.Get("Authorization")), body})
		io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	cfg := aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "TOKEN"), BaseEndpoint: aws.String(srv.URL)}
	sdk := dynamodb.NewFromConfig(cfg)
	lite, err := awslite.NewDynamoDB(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	names := map[string]string{"#s": "state"}
	pairs := []struct {
		name      string
		sdk, lite func() error
	}{
		{"PutItem", func() error {
			_, err := sdk.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"),
				Item:                     map[string]types.AttributeValue{"pk": s("k"), "n": n("12"), "data": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}},
				ConditionExpression:      aws.String("attribute_not_exists(pk) OR #s = :v"),
				ExpressionAttributeNames: names, ExpressionAttributeValues: map[string]types.AttributeValue{":v": s("x")},
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
			return err
		}, func() error {
			_, err := lite.PutItem(ctx, &awslite.PutItemInput{TableName: "t",
				Item:                     map[string]awslite.AttributeValue{"pk": awslite.S("k"), "n": awslite.N(12), "data": {M: map[string]awslite.AttributeValue{}}},
				ConditionExpression:      "attribute_not_exists(pk) OR #s = :v",
				ExpressionAttributeNames: names, ExpressionAttributeValues: map[string]awslite.AttributeValue{":v": awslite.S("x")},
				ReturnValuesOnConditionCheckFailure: "ALL_OLD"})
			return err
		}},
		{"GetItem", func() error {
			_, err := sdk.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"), Key: map[string]types.AttributeValue{"pk": s("k")}, ConsistentRead: aws.Bool(true)})
			return err
		}, func() error {
			_, err := lite.GetItem(ctx, &awslite.GetItemInput{TableName: "t", Key: map[string]awslite.AttributeValue{"pk": awslite.S("k")}, ConsistentRead: true})
			return err
		}},
		{"UpdateItem", func() error {
			_, err := sdk.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("t"), Key: map[string]types.AttributeValue{"pk": s("k")},
				UpdateExpression: aws.String("SET #s = :v REMOVE x"), ConditionExpression: aws.String("claim_id = :v"),
				ExpressionAttributeNames: names, ExpressionAttributeValues: map[string]types.AttributeValue{":v": s("x")},
				ReturnValues: types.ReturnValueAllNew, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
			return err
		}, func() error {
			_, err := lite.UpdateItem(ctx, &awslite.UpdateItemInput{TableName: "t", Key: map[string]awslite.AttributeValue{"pk": awslite.S("k")},
				UpdateExpression: "SET #s = :v REMOVE x", ConditionExpression: "claim_id = :v",
				ExpressionAttributeNames: names, ExpressionAttributeValues: map[string]awslite.AttributeValue{":v": awslite.S("x")},
				ReturnValues: "ALL_NEW", ReturnValuesOnConditionCheckFailure: "ALL_OLD"})
			return err
		}},
		{"DeleteItem", func() error {
			_, err := sdk.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("t"), Key: map[string]types.AttributeValue{"pk": s("k")},
				ConditionExpression: aws.String("#s = :v"), ExpressionAttributeNames: names, ExpressionAttributeValues: map[string]types.AttributeValue{":v": s("x")}})
			return err
		}, func() error {
			_, err := lite.DeleteItem(ctx, &awslite.DeleteItemInput{TableName: "t", Key: map[string]awslite.AttributeValue{"pk": awslite.S("k")},
				ConditionExpression: "#s = :v", ExpressionAttributeNames: names, ExpressionAttributeValues: map[string]awslite.AttributeValue{":v": awslite.S("x")}})
			return err
		}},
	}
	for _, p := range pairs {
		got = nil
		if err := p.sdk(); err != nil {
			t.Fatalf("%s by the SDK: %v", p.name, err)
		}
		if err := p.lite(); err != nil {
			t.Fatalf("%s by awslite: %v", p.name, err)
		}
		want, have := got[0], got[1]
		// The SDK signs its own bookkeeping headers too; compare the rest.
		want.signed = slices.DeleteFunc(want.signed, func(h string) bool { return strings.HasPrefix(h, "amz-sdk-") })
		have.signed = slices.DeleteFunc(have.signed, func(h string) bool { return strings.HasPrefix(h, "amz-sdk-") })
		if !reflect.DeepEqual(want, have) {
			t.Errorf("%s:\n SDK    %+v\n awslite %+v", p.name, want, have)
		}
	}
}
