package apigateway

import (
	"strconv"

	"github.com/aws/aws-lambda-go/events"
)

// JWTPrincipal is the principal of a JWT's issuer and subject together:
// "jwt:" + len(iss) + ":" + iss + ":" + sub. The issuer's length comes
// first, so no two (issuer, subject) pairs share a principal, whatever
// colons either holds.
func JWTPrincipal(iss, sub string) string {
	return "jwt:" + strconv.Itoa(len(iss)) + ":" + iss + ":" + sub
}

// PrincipalV2 is the principal of an HTTP API request's authorizer: a JWT
// authorizer's issuer and subject, else an IAM caller's ARN, else a Lambda
// authorizer's principalId; "" when there is none (no authorizer, or a
// Lambda authorizer's simple response, which names no principal).
//
// The wrapper scopes its records by these names, and the upload API (this
// module's presign function) its tenants, so each is part of a stored key:
// changing one orphans every record written under the old name (tests
// freeze them). Each carries its source ("jwt:", "iam:", "lambda:"), so
// identities from different sources never share a namespace (a JWT whose
// sub is an ARN is not that IAM principal), and the same subject from two
// issuers is two principals.
func PrincipalV2(a *events.APIGatewayV2HTTPRequestContextAuthorizerDescription) string {
	if a == nil {
		return ""
	}
	if a.JWT != nil && a.JWT.Claims["sub"] != "" {
		return JWTPrincipal(a.JWT.Claims["iss"], a.JWT.Claims["sub"])
	}
	if a.IAM != nil && a.IAM.UserARN != "" {
		return "iam:" + a.IAM.UserARN
	}
	if p, ok := a.Lambda["principalId"].(string); ok && p != "" {
		return "lambda:" + p
	}
	return ""
}

// PrincipalV1 is the principal of a REST API request, named as PrincipalV2
// names an HTTP API's: a Cognito user pool authorizer's claims (issuer and
// subject), else an IAM caller's ARN, else a Lambda authorizer's
// principalId; "" when there is none.
func PrincipalV1(c events.APIGatewayProxyRequestContext) string {
	if claims, ok := c.Authorizer["claims"].(map[string]any); ok {
		sub, _ := claims["sub"].(string)
		iss, _ := claims["iss"].(string)
		if sub != "" {
			return JWTPrincipal(iss, sub)
		}
	}
	if c.Identity.UserArn != "" {
		return "iam:" + c.Identity.UserArn
	}
	if p, ok := c.Authorizer["principalId"].(string); ok && p != "" {
		return "lambda:" + p
	}
	return ""
}
