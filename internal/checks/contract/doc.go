// Package contract holds the contract tests. The local stack's traffic goes
// through a third-party OpenAPI validating proxy (Stoplight Prism) loaded
// with the repository's openapi.yaml, so a request or response that drifts
// from the published contract fails the test; and pkg/api's wire types are
// compared with openapi.yaml's schemas (and EventDetail with
// docs/events.schema.json), member by member and both ways, without a
// server. It has no code of its own.
package contract
