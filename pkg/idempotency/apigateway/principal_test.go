package apigateway_test

import (
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/onceupload/onceupload/pkg/idempotency/apigateway"
)

// The principals are parts of stored keys (the wrapper's records, the
// upload API's tenants): these outputs are frozen. A change here orphans
// every record written under the old name, and needs a CHANGELOG entry
// saying so.

type v2auth = events.APIGatewayV2HTTPRequestContextAuthorizerDescription

func TestPrincipalV2Golden(t *testing.T) {
	jwt := func(claims map[string]string) *v2auth {
		return &v2auth{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: claims}}
	}
	for _, tt := range []struct {
		name string
		a    *v2auth
		want string
	}{
		{"no authorizer", nil, ""},
		{"jwt", jwt(map[string]string{"iss": "https://idp", "sub": "u1"}), "jwt:11:https://idp:u1"},
		{"cognito user pool", jwt(map[string]string{"iss": "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Ab", "sub": "5f1e"}),
			"jwt:56:https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Ab:5f1e"},
		{"jwt without iss", jwt(map[string]string{"sub": "u1"}), "jwt:0::u1"},
		{"jwt without sub", jwt(map[string]string{"iss": "https://idp"}), ""},
		{"iam", &v2auth{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::1:user/a"}}, "iam:arn:aws:iam::1:user/a"},
		{"lambda", &v2auth{Lambda: map[string]any{"principalId": "p1"}}, "lambda:p1"},
		{"lambda simple response", &v2auth{Lambda: map[string]any{"tenant": "t"}}, ""},
	} {
		if got := apigateway.PrincipalV2(tt.a); got != tt.want {
			t.Errorf("%s: PrincipalV2 = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestPrincipalV1Golden(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    events.APIGatewayProxyRequestContext
		want string
	}{
		{"none", events.APIGatewayProxyRequestContext{}, ""},
		{"cognito", events.APIGatewayProxyRequestContext{Authorizer: map[string]any{"claims": map[string]any{"iss": "https://idp", "sub": "u1"}}}, "jwt:11:https://idp:u1"},
		{"iam", events.APIGatewayProxyRequestContext{Identity: events.APIGatewayRequestIdentity{UserArn: "arn:aws:iam::1:user/a"}}, "iam:arn:aws:iam::1:user/a"},
		{"lambda", events.APIGatewayProxyRequestContext{Authorizer: map[string]any{"principalId": "p1"}}, "lambda:p1"},
	} {
		if got := apigateway.PrincipalV1(tt.c); got != tt.want {
			t.Errorf("%s: PrincipalV1 = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// No (issuer, subject) pair shifts into another through their colons.
func TestJWTPrincipalIsUnambiguous(t *testing.T) {
	if a, b := apigateway.JWTPrincipal("a:b", "c"), apigateway.JWTPrincipal("a", "b:c"); a == b {
		t.Errorf("JWTPrincipal(%q, %q) = JWTPrincipal(%q, %q) = %q", "a:b", "c", "a", "b:c", a)
	}
}
