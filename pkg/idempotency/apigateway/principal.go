package apigateway

import (
	"errors"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
)

// ErrAnonymousJWT is PrincipalV2's and PrincipalV1's error for a JWT that
// names neither a subject (sub) nor a client (client_id, azp). A JWT is
// never anonymous: its callers would share one name, so it is refused.
var ErrAnonymousJWT = errors.New("apigateway: the JWT names no subject (sub) and no client (client_id or azp)")

// JWTPrincipal is the principal of a JWT's issuer and subject together:
// "jwt:" + len(iss) + ":" + iss + ":" + sub. The issuer's length comes
// first, so no two (issuer, subject) pairs share a principal, whatever
// colons either holds.
func JWTPrincipal(iss, sub string) string {
	return "jwt:" + strconv.Itoa(len(iss)) + ":" + iss + ":" + sub
}

// JWTClientPrincipal is the principal of a JWT without a subject, named by
// its issuer and OAuth client (client_id, else azp): "jwt-client:" +
// len(iss) + ":" + iss + ":" + client. Its prefix is not JWTPrincipal's,
// so a client never shares a name with a subject.
func JWTClientPrincipal(iss, client string) string {
	return "jwt-client:" + strconv.Itoa(len(iss)) + ":" + iss + ":" + client
}

// CognitoIdentityPrincipal is the principal of an IAM caller that came
// through a Cognito identity pool: "cognito-identity:" + len(pool) + ":" +
// pool + ":" + identityID. Every user of a pool calls with the same
// assumed-role ARN, so the ARN cannot name them; the identity can.
func CognitoIdentityPrincipal(pool, identityID string) string {
	return "cognito-identity:" + strconv.Itoa(len(pool)) + ":" + pool + ":" + identityID
}

// PrincipalV2 is the principal of an HTTP API request's authorizer:
//
//   - a JWT authorizer's: JWTPrincipal of its issuer and sub, else
//     JWTClientPrincipal of its issuer and client_id (else azp), else
//     ErrAnonymousJWT;
//   - an IAM caller's: CognitoIdentityPrincipal when it came through a
//     Cognito identity pool, else "iam:" + its ARN;
//   - a Lambda authorizer's: "lambda:" + its principalId;
//
// and "" when there is none (no authorizer, or a Lambda authorizer's
// simple response, which names no principal).
//
// The wrapper scopes its records by these names, and the upload API (this
// module's presign function) its tenants, so each is part of a stored key:
// changing one orphans every record written under the old name (tests
// freeze them). Each carries its source, so identities from different
// sources never share a namespace (a JWT whose sub is an ARN is not that
// IAM principal), and the same subject from two issuers is two principals.
func PrincipalV2(a *events.APIGatewayV2HTTPRequestContextAuthorizerDescription) (string, error) {
	if a == nil {
		return "", nil
	}
	if a.JWT != nil {
		c := a.JWT.Claims
		return jwtPrincipal(c["iss"], c["sub"], c["client_id"], c["azp"])
	}
	if a.IAM != nil {
		if id := a.IAM.CognitoIdentity; id.IdentityID != "" {
			return CognitoIdentityPrincipal(id.IdentityPoolID, id.IdentityID), nil
		}
		if a.IAM.UserARN != "" {
			return "iam:" + a.IAM.UserARN, nil
		}
	}
	if p, ok := a.Lambda["principalId"].(string); ok && p != "" {
		return "lambda:" + p, nil
	}
	return "", nil
}

// PrincipalV1 is the principal of a REST API request, named as PrincipalV2
// names an HTTP API's: a Cognito user pool authorizer's claims, else an
// IAM caller (through a Cognito identity pool or not), else a Lambda
// authorizer's principalId; else, without any of those, the API key's id
// ("apikey:" + identity.apiKeyId), which tells apart the customers of an
// API that knows them by key only; "" when there is none.
func PrincipalV1(c events.APIGatewayProxyRequestContext) (string, error) {
	if claims, ok := c.Authorizer["claims"].(map[string]any); ok {
		str := func(name string) string { s, _ := claims[name].(string); return s }
		return jwtPrincipal(str("iss"), str("sub"), str("client_id"), str("azp"))
	}
	if id := c.Identity; id.CognitoIdentityID != "" {
		return CognitoIdentityPrincipal(id.CognitoIdentityPoolID, id.CognitoIdentityID), nil
	}
	if c.Identity.UserArn != "" {
		return "iam:" + c.Identity.UserArn, nil
	}
	if p, ok := c.Authorizer["principalId"].(string); ok && p != "" {
		return "lambda:" + p, nil
	}
	if c.Identity.APIKeyID != "" {
		return "apikey:" + c.Identity.APIKeyID, nil
	}
	return "", nil
}

// jwtPrincipal names a JWT by its subject, else its client.
func jwtPrincipal(iss, sub, clientID, azp string) (string, error) {
	switch {
	case sub != "":
		return JWTPrincipal(iss, sub), nil
	case clientID != "":
		return JWTClientPrincipal(iss, clientID), nil
	case azp != "":
		return JWTClientPrincipal(iss, azp), nil
	}
	return "", ErrAnonymousJWT
}
