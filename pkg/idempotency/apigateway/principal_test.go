package apigateway_test

import (
	"errors"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/onceupload/onceupload/pkg/idempotency/apigateway"
)

// The principals are parts of stored keys (the wrapper's records, the
// upload API's tenants): these outputs are frozen. A change here orphans
// every record written under the old name, and needs a CHANGELOG entry
// saying so.

type v2auth = events.APIGatewayV2HTTPRequestContextAuthorizerDescription

// cognitoRole is the ARN every user of a Cognito identity pool calls with.
const cognitoRole = "arn:aws:sts::1:assumed-role/pool-auth/CognitoIdentityCredentials"

func TestPrincipalV2Golden(t *testing.T) {
	jwt := func(claims map[string]string) *v2auth {
		return &v2auth{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: claims}}
	}
	iam := func(arn, pool, id string) *v2auth {
		return &v2auth{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: arn,
			CognitoIdentity: events.APIGatewayV2HTTPRequestContextAuthorizerCognitoIdentity{IdentityPoolID: pool, IdentityID: id}}}
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
		{"jwt with sub and client_id", jwt(map[string]string{"iss": "https://idp", "sub": "u1", "client_id": "c1"}), "jwt:11:https://idp:u1"},
		{"jwt client_id", jwt(map[string]string{"iss": "https://idp", "client_id": "c1", "azp": "c2"}), "jwt-client:11:https://idp:c1"},
		{"jwt azp", jwt(map[string]string{"iss": "https://idp", "azp": "c2"}), "jwt-client:11:https://idp:c2"},
		{"iam", iam("arn:aws:iam::1:user/a", "", ""), "iam:arn:aws:iam::1:user/a"},
		{"iam through a cognito identity pool", iam(cognitoRole, "eu-west-1:0a1b", "eu-west-1:77c3"), "cognito-identity:14:eu-west-1:0a1b:eu-west-1:77c3"},
		{"lambda", &v2auth{Lambda: map[string]any{"principalId": "p1"}}, "lambda:p1"},
		{"lambda simple response", &v2auth{Lambda: map[string]any{"tenant": "t"}}, ""},
	} {
		if got, err := apigateway.PrincipalV2(tt.a); got != tt.want || err != nil {
			t.Errorf("%s: PrincipalV2 = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}

func TestPrincipalV1Golden(t *testing.T) {
	type ctx = events.APIGatewayProxyRequestContext
	type identity = events.APIGatewayRequestIdentity
	claims := func(c map[string]any) ctx { return ctx{Authorizer: map[string]any{"claims": c}} }
	for _, tt := range []struct {
		name string
		c    ctx
		want string
	}{
		{"none", ctx{}, ""},
		{"cognito", claims(map[string]any{"iss": "https://idp", "sub": "u1"}), "jwt:11:https://idp:u1"},
		{"cognito client_id", claims(map[string]any{"iss": "https://idp", "client_id": "c1"}), "jwt-client:11:https://idp:c1"},
		{"cognito azp", claims(map[string]any{"iss": "https://idp", "azp": "c2"}), "jwt-client:11:https://idp:c2"},
		{"iam", ctx{Identity: identity{UserArn: "arn:aws:iam::1:user/a"}}, "iam:arn:aws:iam::1:user/a"},
		{"iam through a cognito identity pool", ctx{Identity: identity{UserArn: cognitoRole, CognitoIdentityPoolID: "eu-west-1:0a1b", CognitoIdentityID: "eu-west-1:77c3"}},
			"cognito-identity:14:eu-west-1:0a1b:eu-west-1:77c3"},
		{"lambda", ctx{Authorizer: map[string]any{"principalId": "p1"}}, "lambda:p1"},
		{"lambda with an api key", ctx{Authorizer: map[string]any{"principalId": "p1"}, Identity: identity{APIKeyID: "k1"}}, "lambda:p1"},
		{"api key", ctx{Identity: identity{APIKeyID: "k1"}}, "apikey:k1"},
	} {
		if got, err := apigateway.PrincipalV1(tt.c); got != tt.want || err != nil {
			t.Errorf("%s: PrincipalV1 = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}

// A JWT that names no one is refused, never taken for no principal.
func TestAnonymousJWTIsRefused(t *testing.T) {
	v2 := &v2auth{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"iss": "https://idp", "scope": "write"}}}
	if got, err := apigateway.PrincipalV2(v2); !errors.Is(err, apigateway.ErrAnonymousJWT) {
		t.Errorf("PrincipalV2 = %q, %v; want ErrAnonymousJWT", got, err)
	}
	v1 := events.APIGatewayProxyRequestContext{Authorizer: map[string]any{"claims": map[string]any{"iss": "https://idp"}}}
	if got, err := apigateway.PrincipalV1(v1); !errors.Is(err, apigateway.ErrAnonymousJWT) {
		t.Errorf("PrincipalV1 = %q, %v; want ErrAnonymousJWT", got, err)
	}
}

// No (issuer, subject) pair shifts into another through their colons, nor
// (pool, identity) pair, and a client is never a subject.
func TestPrincipalsAreUnambiguous(t *testing.T) {
	for _, pair := range [][2]string{
		{apigateway.JWTPrincipal("a:b", "c"), apigateway.JWTPrincipal("a", "b:c")},
		{apigateway.JWTClientPrincipal("a:b", "c"), apigateway.JWTClientPrincipal("a", "b:c")},
		{apigateway.CognitoIdentityPrincipal("a:b", "c"), apigateway.CognitoIdentityPrincipal("a", "b:c")},
		{apigateway.JWTPrincipal("i", "c"), apigateway.JWTClientPrincipal("i", "c")},
	} {
		if pair[0] == pair[1] {
			t.Errorf("two identities named %q", pair[0])
		}
	}
}
