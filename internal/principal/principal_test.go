package principal

import (
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

type v2auth = events.APIGatewayV2HTTPRequestContextAuthorizerDescription

func TestV2(t *testing.T) {
	tests := []struct {
		name string
		a    *v2auth
		want string
	}{
		{"no authorizer", nil, ""},
		{"jwt", &v2auth{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"iss": "https://idp", "sub": "u1"}}}, "jwt:11:https://idp:u1"},
		{"jwt without sub", &v2auth{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"iss": "https://idp"}}}, ""},
		{"iam", &v2auth{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::1:user/a"}}, "iam:arn:aws:iam::1:user/a"},
		{"lambda", &v2auth{Lambda: map[string]any{"principalId": "p1"}}, "lambda:p1"},
		{"lambda simple response", &v2auth{Lambda: map[string]any{"tenant": "t"}}, ""},
	}
	for _, tt := range tests {
		if got := V2(tt.a); got != tt.want {
			t.Errorf("%s: V2 = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestV1(t *testing.T) {
	tests := []struct {
		name string
		c    events.APIGatewayProxyRequestContext
		want string
	}{
		{"none", events.APIGatewayProxyRequestContext{}, ""},
		{"cognito", events.APIGatewayProxyRequestContext{Authorizer: map[string]any{"claims": map[string]any{"iss": "https://idp", "sub": "u1"}}}, "jwt:11:https://idp:u1"},
		{"iam", events.APIGatewayProxyRequestContext{Identity: events.APIGatewayRequestIdentity{UserArn: "arn:aws:iam::1:user/a"}}, "iam:arn:aws:iam::1:user/a"},
		{"lambda", events.APIGatewayProxyRequestContext{Authorizer: map[string]any{"principalId": "p1"}}, "lambda:p1"},
	}
	for _, tt := range tests {
		if got := V1(tt.c); got != tt.want {
			t.Errorf("%s: V1 = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// No (issuer, subject) pair shifts into another through their colons.
func TestJWTIsUnambiguous(t *testing.T) {
	if a, b := JWT("a:b", "c"), JWT("a", "b:c"); a == b {
		t.Errorf("JWT(%q, %q) = JWT(%q, %q) = %q", "a:b", "c", "a", "b:c", a)
	}
}
