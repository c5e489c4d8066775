// Package contract holds the contract tests: the local stack's traffic goes
// through a third-party OpenAPI validating proxy (Stoplight Prism) loaded
// with the repository's openapi.yaml, so a request or response that drifts
// from the published contract fails the test. It has no code of its own.
package contract
