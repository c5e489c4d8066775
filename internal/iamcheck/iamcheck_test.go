// Package iamcheck decides every permission the stack relies on with a real
// IAM policy evaluator (@cloud-copilot/iam-simulate, a test-only npm
// folder in sim/ that install-tools.sh installs into .tools/iamsim). It
// transforms template.yaml with aws-sam-translator for each parameter set
// that changes a policy, resolves the policies to the ARNs of a fixed
// account, region and stack, and evaluates every call each role makes
// (calls) with the role's policies and the bucket's (or the KMS key's)
// together: each must be allowed, and each abuse denied. Removing any
// statement, action or condition key must flip at least one of those
// answers, so no grant or denial is there unproven. TestRecordedCallsAreListed
// holds the list of calls to what the functions really send.
package iamcheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/onceupload/onceupload/internal/testenv"
)

// An expectation is one request and the decision AWS must reach on it.
type expectation struct {
	name      string
	principal string // "" is an anonymous request
	// role whose policies are the principal's identity policies; foreign
	// principals bring their own (identity).
	role     string
	identity []any
	action   string
	resource string
	context  map[string]string
	// resourcePolicy: "bucket", "key" or "".
	resourcePolicy string
	allowed        bool
}

// allowedCalls are calls as expectations that AWS allows.
func allowedCalls(t *testing.T, d *deployment) []expectation {
	t.Helper()
	var out []expectation
	for _, c := range d.calls(t) {
		out = append(out, expectation{
			name: c.String(), principal: d.functions(t)[c.function].session, role: c.role,
			action: c.action, resource: c.resource, context: c.context, resourcePolicy: c.resourcePolicy, allowed: true,
		})
	}
	return out
}

// abuses are requests that must be denied: writes that could replace an
// upload's object, writes outside the prefix, other accounts and anonymous
// callers, functions doing what is not theirs, KMS other than through S3,
// plain HTTP, X-Ray with tracing off.
func abuses(t *testing.T, d *deployment) []expectation {
	t.Helper()
	fns := d.functions(t)
	presign, finalize, events := fns["PresignFunction"], fns["FinalizeFunction"], fns["EventsFunction"]
	object := presign.bucket + "/" + presign.prefix + uploadKey
	put := func(ifNoneMatch bool) map[string]string {
		ctx := map[string]string{"s3:ObjectCreationOperation": "true"}
		if ifNoneMatch {
			ctx["s3:if-none-match"] = "*"
		}
		return s3Context(ctx, false)
	}
	as := func(e functionEnv, name, action, resource string, ctx map[string]string, policy string) expectation {
		return expectation{name: e.role + ": " + name, principal: e.session, role: e.role, action: action, resource: resource, context: ctx, resourcePolicy: policy}
	}
	// A principal of another account whose own policies allow everything:
	// only the bucket's policy could let it in.
	admin := []any{map[string]any{"name": "admin", "policy": map[string]any{"Version": "2012-10-17",
		"Statement": []any{map[string]any{"Effect": "Allow", "Action": "*", "Resource": "*"}}}}}
	foreign := func(name, action, resource string, ctx map[string]string) expectation {
		return expectation{name: name, principal: "arn:aws:sts::444455556666:assumed-role/Admin/intruder", identity: admin,
			action: action, resource: resource, context: ctx, resourcePolicy: "bucket"}
	}
	out := []expectation{
		as(presign, "a PUT without If-None-Match (overwrites)", "s3:PutObject", object, put(false), "bucket"),
		as(presign, "a presigned PUT without If-None-Match", "s3:PutObject", object, s3Context(map[string]string{"s3:ObjectCreationOperation": "true"}, true), "bucket"),
		as(presign, "CompleteMultipartUpload without If-None-Match", "s3:PutObject", object, put(false), "bucket"),
		as(presign, "a write outside the prefix", "s3:PutObject", presign.bucket+"/elsewhere/"+uploadKey, put(true), "bucket"),
		as(presign, "a write to another bucket", "s3:PutObject", "arn:aws:s3:::another-bucket/"+presign.prefix+uploadKey, put(true), ""),
		as(presign, "a read over plain HTTP", "s3:GetObject", object, map[string]string{"aws:SecureTransport": "false"}, "bucket"),
		as(presign, "deleting the bucket", "s3:DeleteBucket", presign.bucket, s3Context(nil, false), "bucket"),
		as(presign, "a scan of the table", "dynamodb:Scan", presign.table, nil, ""),
		as(finalize, "writing an object", "s3:PutObject", object, put(true), "bucket"),
		as(finalize, "completing an upload", "s3:PutObject", object, put(true), "bucket"),
		as(finalize, "deleting a record", "dynamodb:DeleteItem", finalize.table, nil, ""),
		as(events, "reading an object", "s3:GetObject", object, s3Context(nil, false), "bucket"),
		as(events, "writing an object", "s3:PutObject", object, put(true), "bucket"),
		as(events, "writing the table", "dynamodb:PutItem", events.table, nil, ""),
		foreign("another account writes an object", "s3:PutObject", object, put(true)),
		foreign("another account reads an object", "s3:GetObject", object, s3Context(nil, false)),
		foreign("another account lists the bucket", "s3:ListBucket", presign.bucket, s3Context(nil, false)),
		{name: "anonymous read", action: "s3:GetObject", resource: object, context: map[string]string{"aws:SecureTransport": "true"}, resourcePolicy: "bucket"},
		{name: "anonymous write", action: "s3:PutObject", resource: object, context: map[string]string{"aws:SecureTransport": "true", "s3:if-none-match": "*", "s3:ObjectCreationOperation": "true"}, resourcePolicy: "bucket"},
	}
	for _, e := range []functionEnv{presign, finalize, events} {
		if !e.tracing {
			out = append(out, as(e, "X-Ray with tracing off", "xray:PutTraceSegments", "*", nil, ""))
		}
	}
	if presign.key != "" {
		direct := map[string]string{"kms:CallerAccount": account}
		otherRegion := viaS3(presign.bucket)
		otherRegion["kms:ViaService"] = "s3.us-east-1.amazonaws.com"
		otherService := viaS3(presign.bucket)
		otherService["kms:ViaService"] = "dynamodb." + region + ".amazonaws.com"
		out = append(out,
			as(presign, "KMS Decrypt called directly, not via S3", "kms:Decrypt", presign.key, direct, "key"),
			as(presign, "KMS GenerateDataKey via S3 of another region", "kms:GenerateDataKey", presign.key, otherRegion, "key"),
			as(presign, "KMS Decrypt via another service", "kms:Decrypt", presign.key, otherService, "key"),
			as(finalize, "KMS GenerateDataKey via S3", "kms:GenerateDataKey", finalize.key, viaS3(finalize.bucket), "key"),
			as(finalize, "KMS Decrypt called directly", "kms:Decrypt", finalize.key, direct, "key"),
			as(events, "KMS Decrypt via S3", "kms:Decrypt", events.key, viaS3(events.bucket), "key"),
		)
	}
	return out
}

// policies are the policies a deployment's requests are evaluated with.
type policies struct {
	roles  map[string][]any // role's logical id: its inline policies, {name, policy}
	bucket map[string]any
}

func (d *deployment) policies(t *testing.T) policies {
	t.Helper()
	p := policies{roles: map[string][]any{}}
	for id, r := range d.cfn.Resources {
		if r.Type != "AWS::IAM::Role" {
			continue
		}
		if r.Properties["ManagedPolicyArns"] != nil || r.Properties["PermissionsBoundary"] != nil {
			t.Fatalf("%s: %s has managed policies or a boundary: give the simulation their documents", d.name, id)
		}
		for _, pol := range d.property(t, id, "Policies").([]any) {
			pol := pol.(map[string]any)
			p.roles[id] = append(p.roles[id], map[string]any{"name": pol["PolicyName"], "policy": pol["PolicyDocument"]})
		}
	}
	p.bucket = d.property(t, "UploadBucketPolicy", "PolicyDocument").(map[string]any)
	return p
}

// simulation is e as the evaluator's input, evaluated with p.
func (p policies) simulation(e expectation) map[string]any {
	resourceAccount := account
	if parts := strings.Split(e.resource, ":"); len(parts) > 4 && parts[4] != "" {
		resourceAccount = parts[4]
	}
	ctx := map[string]string{}
	if e.principal != "" {
		ctx["aws:PrincipalArn"] = e.principal
		ctx["aws:PrincipalAccount"] = strings.Split(e.principal, ":")[4]
	}
	for k, v := range e.context {
		ctx[k] = v
	}
	var principal any = map[string]any{"type": "Anonymous"}
	identity := []any{}
	if e.principal != "" {
		principal = e.principal
		identity = e.identity
		if e.role != "" {
			identity = p.roles[e.role]
		}
	}
	sim := map[string]any{
		"request":                 map[string]any{"principal": principal, "action": e.action, "resource": map[string]any{"resource": e.resource, "accountId": resourceAccount}, "contextVariables": ctx},
		"identityPolicies":        identity,
		"serviceControlPolicies":  []any{},
		"resourceControlPolicies": []any{},
	}
	switch e.resourcePolicy {
	case "bucket":
		sim["resourcePolicy"] = p.bucket
	case "key":
		sim["resourcePolicy"] = keyPolicy
	}
	return sim
}

// decision is the evaluator's answer on one simulation.
type decision struct {
	ID         int      `json:"id"`
	Decision   string   `json:"decision"`
	Errors     string   `json:"errors"`
	Statements []string `json:"statements"`
}

// simulate evaluates every simulation in one run of sim/simulate.cjs.
func simulate(t *testing.T, sims []map[string]any) []decision {
	t.Helper()
	dir := testenv.RequireToolsDir(t, "iamsim", "node_modules/@cloud-copilot/iam-simulate/package.json")
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.RequireTools(t, "node") // says so: skipped, or failed under REQUIRE_INTEGRATION=1
	}
	type job struct {
		ID         int            `json:"id"`
		Simulation map[string]any `json:"simulation"`
	}
	jobs := make([]job, len(sims))
	for i, s := range sims {
		jobs[i] = job{i, s}
	}
	in, err := json.Marshal(jobs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "sim/simulate.cjs")
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("simulate.cjs: %v\n%s", err, stderr.String())
	}
	var ds []decision
	if err := json.Unmarshal(out, &ds); err != nil {
		t.Fatal(err)
	}
	if len(ds) != len(sims) {
		t.Fatalf("simulate.cjs answered %d of %d", len(ds), len(sims))
	}
	return ds
}

// failures evaluates es with p and returns what went otherwise than
// expected, each with the statements that decided it.
func failures(t *testing.T, p policies, es []expectation) []string {
	t.Helper()
	sims := make([]map[string]any, len(es))
	for i, e := range es {
		sims[i] = p.simulation(e)
	}
	var out []string
	for i, d := range simulate(t, sims) {
		e := es[i]
		switch {
		case d.Decision == "Error":
			out = append(out, fmt.Sprintf("%s: the evaluator refused the request: %s", e.name, d.Errors))
		case (d.Decision == "Allowed") != e.allowed:
			want := "Allowed"
			if !e.allowed {
				want = "denied"
			}
			out = append(out, fmt.Sprintf("%s: %s, want %s; decided by: %s", e.name, d.Decision, want, strings.Join(d.Statements, "; ")))
		}
	}
	return out
}

// Every call of every role is allowed and every abuse denied, in every
// parameter set that changes a policy.
func TestPermissions(t *testing.T) {
	for _, d := range deployments(t) {
		t.Run(d.name, func(t *testing.T) {
			es := append(allowedCalls(t, d), abuses(t, d)...)
			for _, f := range failures(t, d.policies(t), es) {
				t.Error(f)
			}
		})
	}
}

// A mutation is one policy with one statement, action or condition key
// taken out.
type mutation struct {
	name   string
	apply  func(p policies) policies
	target string // the role's logical id, or "bucket"
}

// mutations takes out, one at a time, each statement of each role's
// policies and of the bucket policy, each action of a statement with
// several, and each condition key.
func mutations(p policies) []mutation {
	var out []mutation
	each := func(target string, doc map[string]any, set func(p policies, doc map[string]any) policies, label string) {
		stmts := doc["Statement"].([]any)
		for i, s := range stmts {
			s := s.(map[string]any)
			sid := fmt.Sprint(s["Sid"])
			remove := func(what string, edit func(s map[string]any) (map[string]any, bool)) {
				out = append(out, mutation{name: label + "/" + sid + " without " + what, target: target, apply: func(p policies) policies {
					c := clone(doc)
					list := c["Statement"].([]any)
					if s, keep := edit(list[i].(map[string]any)); keep {
						list[i] = s
					} else {
						c["Statement"] = slices.Delete(slices.Clone(list), i, i+1)
					}
					return set(p, c)
				}})
			}
			remove("the statement", func(map[string]any) (map[string]any, bool) { return nil, false })
			if actions, ok := s["Action"].([]any); ok && len(actions) > 1 {
				for j, a := range actions {
					remove(fmt.Sprint(a), func(s map[string]any) (map[string]any, bool) {
						s["Action"] = slices.Delete(slices.Clone(s["Action"].([]any)), j, j+1)
						return s, true
					})
				}
			}
			if cond, ok := s["Condition"].(map[string]any); ok {
				for op, keys := range cond {
					for key := range keys.(map[string]any) {
						remove("the condition "+op+" "+key, func(s map[string]any) (map[string]any, bool) {
							c := s["Condition"].(map[string]any)
							delete(c[op].(map[string]any), key)
							if len(c[op].(map[string]any)) == 0 {
								delete(c, op)
							}
							if len(c) == 0 {
								delete(s, "Condition")
							}
							return s, true
						})
					}
				}
			}
		}
	}
	for role, pols := range p.roles {
		for k, pol := range pols {
			pol := pol.(map[string]any)
			each(role, pol["policy"].(map[string]any), func(p policies, doc map[string]any) policies {
				roles := map[string][]any{}
				for r, ps := range p.roles {
					roles[r] = ps
				}
				ps := slices.Clone(roles[role])
				ps[k] = map[string]any{"name": pol["name"], "policy": doc}
				roles[role] = ps
				return policies{roles: roles, bucket: p.bucket}
			}, role+"/"+fmt.Sprint(pol["name"]))
		}
	}
	each("bucket", p.bucket, func(p policies, doc map[string]any) policies {
		return policies{roles: p.roles, bucket: doc}
	}, "UploadBucketPolicy")
	return out
}

// clone deep-copies a JSON document.
func clone(doc map[string]any) map[string]any {
	b, _ := json.Marshal(doc)
	var c map[string]any
	_ = json.Unmarshal(b, &c)
	return c
}

// Taking out any statement, action or condition key of the roles' or the
// bucket's policies flips at least one expectation: each grant is needed
// by a call, each denial stops an abuse. The parameter set with a KMS key
// and tracing has every statement; the JWT model's policies are the same
// as the anonymous one's.
func TestEveryGrantAndDenialIsNeeded(t *testing.T) {
	var d *deployment
	for _, x := range deployments(t) {
		if x.name == "jwt tracing=Active kms" {
			d = x
		}
	}
	p := d.policies(t)
	es := append(allowedCalls(t, d), abuses(t, d)...)
	if f := failures(t, p, es); len(f) > 0 {
		t.Fatalf("the unchanged policies already fail (TestPermissions says why): %s", f[0])
	}
	// Each mutation is evaluated on the expectations it can change (its
	// role's, or every one with the bucket's policy), all in one run.
	type run struct {
		m  mutation
		es []expectation
	}
	var runs []run
	var sims []map[string]any
	for _, m := range mutations(p) {
		r := run{m: m}
		mp := m.apply(p)
		for _, e := range es {
			if e.role == m.target || (m.target == "bucket" && e.resourcePolicy == "bucket") {
				r.es = append(r.es, e)
				sims = append(sims, mp.simulation(e))
			}
		}
		runs = append(runs, r)
	}
	ds := simulate(t, sims)
	i := 0
	for _, r := range runs {
		var flipped []string
		for _, e := range r.es {
			if d := ds[i]; (d.Decision == "Allowed") != e.allowed {
				flipped = append(flipped, e.name+" → "+d.Decision)
			}
			i++
		}
		if len(flipped) == 0 {
			t.Errorf("%s changes no decision: no listed call needs it, no listed abuse is stopped by it", r.m.name)
			continue
		}
		if len(flipped) > 3 {
			flipped = append(flipped[:3], fmt.Sprintf("and %d more", len(flipped)-3))
		}
		t.Logf("%s flips: %s", r.m.name, strings.Join(flipped, "; "))
	}
}
