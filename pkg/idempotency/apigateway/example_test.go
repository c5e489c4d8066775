package apigateway_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/onceupload/onceupload/pkg/idempotency/apigateway"
	"github.com/onceupload/onceupload/pkg/idempotency/memorystore"
)

// An HTTP API handler charges once per Idempotency-Key: a retry (another
// delivery, the body reformatted) gets the recorded answer, marked as a
// replay; another body under the key is a 422 problem; no key, a 400.
func ExampleMakeIdempotentV2() {
	type (
		request  = events.APIGatewayV2HTTPRequest
		response = events.APIGatewayV2HTTPResponse
	)
	charge := func(ctx context.Context, req request) (response, error) {
		return response{StatusCode: 201, Body: `{"chargeId":"ch_1"}`}, nil // charge the card once
	}
	store := memorystore.New() // in Lambda: dynamostore.New(client, table)
	handler := apigateway.MakeIdempotentV2(store, charge)
	// In main: lambda.Start(handler)

	ctx := context.Background()
	req := request{Headers: map[string]string{"idempotency-key": "order-42"}, Body: `{"amount":1000}`}
	req.RequestContext.HTTP.Method, req.RawPath = "POST", "/payments"
	// The caller, as a JWT authorizer names it: its keys are its own.
	req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"iss": "https://issuer.example", "sub": "customer-7"}},
	}
	req.RequestContext.RequestID = "delivery-1"
	first, _ := handler(ctx, req)
	req.RequestContext.RequestID, req.Body = "delivery-2", `{ "amount": 1000 }`
	retry, _ := handler(ctx, req)
	req.Body = `{"amount":5000}`
	reused, _ := handler(ctx, req)
	delete(req.Headers, "idempotency-key")
	missing, _ := handler(ctx, req)
	fmt.Println(first.StatusCode, retry.StatusCode, retry.Headers["Idempotent-Replay"], retry.Body)
	fmt.Println(reused.StatusCode, reused.Headers["Content-Type"])
	fmt.Println(reused.Body)
	fmt.Println(missing.StatusCode, missing.Headers["Link"])
	// Output:
	// 201 201 true {"chargeId":"ch_1"}
	// 422 application/problem+json
	// {"type":"https://github.com/onceupload/onceupload/blob/main/docs/idempotency.md#idempotency-key-reused","title":"Idempotency-Key is already used","status":422,"detail":"This Idempotency-Key was used with another request (method, path, query or body); a key must not be reused across requests."}
	// 400 <https://github.com/onceupload/onceupload/blob/main/docs/idempotency.md#idempotency-key-missing>; rel="describedby"; type="text/html"
}

// A REST API handler whose keys belong to the caller: two Cognito users who
// send the same key get a record each, and a request without a principal
// is refused with a 401 problem.
func ExampleMakeIdempotentV1() {
	type (
		request  = events.APIGatewayProxyRequest
		response = events.APIGatewayProxyResponse
	)
	orders := 0
	create := func(ctx context.Context, req request) (response, error) {
		orders++
		return response{StatusCode: 201, Body: fmt.Sprintf(`{"order":%d}`, orders)}, nil
	}
	handler := apigateway.MakeIdempotentV1(memorystore.New(), create)

	as := func(sub string) request {
		req := request{HTTPMethod: "POST", Path: "/orders", Headers: map[string]string{"Idempotency-Key": `"cart-7"`}, Body: `{"sku":"a-1"}`}
		if sub != "" {
			req.RequestContext.Authorizer = map[string]any{"claims": map[string]any{"iss": "https://cognito-idp.example", "sub": sub}}
		}
		return req
	}
	ctx := context.Background()
	alice, _ := handler(ctx, as("alice"))
	bob, _ := handler(ctx, as("bob"))
	again, _ := handler(ctx, as("alice"))
	nobody, _ := handler(ctx, as(""))
	fmt.Println(alice.Body, bob.Body, again.Body, again.Headers["Idempotent-Replay"])
	fmt.Println(nobody.StatusCode, nobody.Headers["Content-Type"])
	// Output:
	// {"order":1} {"order":2} {"order":1} true
	// 401 application/problem+json
}

// Which answers are kept is Options.Record's choice for statuses below 500:
// here a 402 is not, so the client may top up its balance and retry under
// the same key. A 5xx is never kept.
func ExampleOptions_record() {
	funded := false
	pay := func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		if !funded {
			return events.APIGatewayV2HTTPResponse{StatusCode: 402}, nil
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: 200}, nil
	}
	handler := apigateway.MakeIdempotentV2(memorystore.New(), pay, func(o *apigateway.Options) {
		o.Record = func(status int) bool { return status != 402 && apigateway.DefaultRecord(status) }
		o.RequirePrincipal = false // an API without an authorizer: its callers share the key space
	})
	req := events.APIGatewayV2HTTPRequest{Headers: map[string]string{"idempotency-key": "k-1"}}
	first, _ := handler(context.Background(), req)
	funded = true
	second, _ := handler(context.Background(), req)
	third, _ := handler(context.Background(), req)
	fmt.Println(first.StatusCode, second.StatusCode, third.StatusCode, third.Headers["Idempotent-Replay"])
	// Output: 402 200 200 true
}

// An HTTP API Lambda authorizer's simple response names no principal, so
// without a principal function its callers would share one key space:
// here the tenant its context carries names each caller, and a request
// without one is refused.
func ExampleOptions_principalFromV2() {
	orders := 0
	create := func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		orders++
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: fmt.Sprintf(`{"order":%d}`, orders)}, nil
	}
	handler := apigateway.MakeIdempotentV2(memorystore.New(), create, func(o *apigateway.Options) {
		o.PrincipalFromV2 = func(r events.APIGatewayV2HTTPRequest) (string, error) {
			var tenant string
			if a := r.RequestContext.Authorizer; a != nil {
				tenant, _ = a.Lambda["tenant"].(string) // the simple response's context
			}
			if tenant == "" {
				return "", errors.New("the authorizer named no tenant")
			}
			return "tenant:" + tenant, nil
		}
	})
	as := func(tenant string) events.APIGatewayV2HTTPRequest {
		req := events.APIGatewayV2HTTPRequest{Headers: map[string]string{"idempotency-key": "cart-7"}, Body: `{"sku":"a-1"}`}
		req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenant": tenant}}
		return req
	}
	ctx := context.Background()
	a, _ := handler(ctx, as("acme"))
	b, _ := handler(ctx, as("globex"))
	again, _ := handler(ctx, as("acme"))
	nobody, _ := handler(ctx, as(""))
	fmt.Println(a.Body, b.Body, again.Body, again.Headers["Idempotent-Replay"], nobody.StatusCode)
	// Output: {"order":1} {"order":2} {"order":1} true 401
}
