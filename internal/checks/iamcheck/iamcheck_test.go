// Package iamcheck decides every permission the stack relies on with a real
// IAM policy evaluator (@cloud-copilot/iam-simulate, a test-only npm
// folder in sim/ that install-tools.sh installs into .tools/iamsim). It
// transforms template.yaml with aws-sam-translator for each parameter set
// that changes a policy, resolves the policies to the ARNs of a fixed
// account, region and stack, and evaluates every call each role makes
// (calls) with the role's policies and the bucket's (or the KMS key's)
// together: each must be allowed, and each abuse denied; so must the
// functions' invoke permissions (S3 and the HTTP API only, from this
// stack's bucket and API). Removing any
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

	"gopkg.in/yaml.v3"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
)

// An expectation is one request and the decision AWS must reach on it.
type expectation struct {
	name      string
	principal string // a role session, a service ("s3.amazonaws.com"); "" is an anonymous request
	// role whose policies are the principal's identity policies; foreign
	// principals bring their own (identity).
	role     string
	identity []any
	action   string
	resource string
	context  map[string]string
	// resourcePolicy: "bucket", "key", "function:" and a function's
	// logical id (its invoke permissions), or "".
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
	// functions are each function's resource policy, as Lambda makes it
	// of the template's AWS::Lambda::Permission resources.
	functions map[string]map[string]any
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
	p.functions = map[string]map[string]any{}
	for id, r := range d.cfn.Resources {
		if r.Type != "AWS::Lambda::Permission" {
			continue
		}
		fn := d.str(t, id, "FunctionName")
		for _, f := range []string{"PresignFunction", "FinalizeFunction", "EventsFunction"} {
			if arn, _ := d.getAtt(f, "Arn"); fn == arn || fn == generatedName(f) {
				fn = f
			}
		}
		principal := d.str(t, id, "Principal")
		if !strings.HasSuffix(principal, ".amazonaws.com") {
			t.Fatalf("%s: %s grants %s: teach the test other principals", d.name, id, principal)
		}
		arn, _ := d.getAtt(fn, "Arn")
		st := map[string]any{"Sid": id, "Effect": "Allow", "Principal": map[string]any{"Service": principal},
			"Action": d.str(t, id, "Action"), "Resource": arn}
		cond := map[string]any{}
		if r.Properties["SourceAccount"] != nil {
			cond["StringEquals"] = map[string]any{"AWS:SourceAccount": d.str(t, id, "SourceAccount")}
		}
		if r.Properties["SourceArn"] != nil {
			cond["ArnLike"] = map[string]any{"AWS:SourceArn": d.str(t, id, "SourceArn")}
		}
		if len(cond) > 0 {
			st["Condition"] = cond
		}
		if p.functions[fn] == nil {
			p.functions[fn] = map[string]any{"Version": "2012-10-17", "Statement": []any{}}
		}
		p.functions[fn]["Statement"] = append(p.functions[fn]["Statement"].([]any), st)
	}
	// One order whatever the map's: the mutations name statements by it.
	for _, pol := range p.functions {
		slices.SortFunc(pol["Statement"].([]any), func(a, b any) int {
			return strings.Compare(a.(map[string]any)["Sid"].(string), b.(map[string]any)["Sid"].(string))
		})
	}
	return p
}

// invocations are who may invoke the functions: S3's notifications of the
// stack's bucket invoke finalize, the HTTP API's routes invoke presign;
// another bucket, account or API must not, nor one service the other's
// function. (The events function is invoked by its event source mapping,
// with its role, which needs no permission.)
func invocations(t *testing.T, d *deployment) []expectation {
	t.Helper()
	fns := d.functions(t)
	bucket := fns["FinalizeFunction"].bucket
	invoke := func(name, fn, service, sourceArn, sourceAccount string, allowed bool) expectation {
		arn, _ := d.getAtt(fn, "Arn")
		return expectation{name: name, principal: service, action: "lambda:InvokeFunction", resource: arn.(string),
			context: map[string]string{"aws:SourceArn": sourceArn, "aws:SourceAccount": sourceAccount}, resourcePolicy: "function:" + fn, allowed: allowed}
	}
	out := []expectation{
		invoke("S3 invokes finalize for the stack's bucket", "FinalizeFunction", "s3.amazonaws.com", bucket, account, true),
		invoke("S3 invokes finalize for another bucket", "FinalizeFunction", "s3.amazonaws.com", "arn:aws:s3:::someone-elses-bucket", account, false),
		invoke("S3 invokes finalize for a bucket of that name in another account", "FinalizeFunction", "s3.amazonaws.com", bucket, "444455556666", false),
		invoke("API Gateway invokes finalize", "FinalizeFunction", "apigateway.amazonaws.com", bucket, account, false),
		invoke("S3 invokes presign", "PresignFunction", "s3.amazonaws.com", bucket, account, false),
	}
	apiID := generatedName("HttpApi")
	paths := d.property(t, "HttpApi", "Body", "paths").(map[string]any)
	for path, methods := range paths {
		for method := range methods.(map[string]any) {
			route := strings.ToUpper(method) + strings.ReplaceAll(path, "{uploadId}", uploadKey)
			source := "arn:aws:execute-api:" + region + ":" + account + ":" + apiID + "/$default/" + route
			out = append(out, invoke("the API's "+route+" invokes presign", "PresignFunction", "apigateway.amazonaws.com", source, account, true))
		}
	}
	out = append(out, invoke("another API invokes presign", "PresignFunction", "apigateway.amazonaws.com",
		"arn:aws:execute-api:"+region+":"+account+":another/$default/POST/uploads", account, false))
	return out
}

// simulation is e as the evaluator's input, evaluated with p.
func (p policies) simulation(e expectation) map[string]any {
	resourceAccount := account
	if parts := strings.Split(e.resource, ":"); len(parts) > 4 && parts[4] != "" {
		resourceAccount = parts[4]
	}
	ctx := map[string]string{}
	if strings.HasPrefix(e.principal, "arn:") {
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
		if e.identity != nil {
			identity = e.identity
		}
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
	default:
		if fn, ok := strings.CutPrefix(e.resourcePolicy, "function:"); ok {
			sim["resourcePolicy"] = p.functions[fn]
		}
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
	if err != nil && os.Getenv("REQUIRE_INTEGRATION") == "1" {
		t.Fatalf("the IAM evaluator needs Node.js: %v", err)
	} else if err != nil {
		t.Skipf("the IAM evaluator needs Node.js (set REQUIRE_INTEGRATION=1 to fail instead): %v", err)
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
			es := append(append(allowedCalls(t, d), abuses(t, d)...), invocations(t, d)...)
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
	target string // the role's logical id, or the resource policy (expectation.resourcePolicy)
	// overlapped is a statement SAM generated, not template.yaml: its
	// invoke permissions per route overlap (GET /uploads/* matches GET
	// /uploads/{uploadId}/parts too), so taking one out may change nothing.
	overlapped bool
}

// templateResources are the logical ids template.yaml itself declares.
var templateResources = func() map[string]any {
	var tmpl struct{ Resources map[string]any }
	b, err := os.ReadFile("../../../template.yaml")
	if err == nil {
		err = yaml.Unmarshal(b, &tmpl)
	}
	if err != nil {
		panic(err)
	}
	return tmpl.Resources
}()

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
				_, written := templateResources[sid]
				overlapped := strings.HasPrefix(target, "function:") && !written
				out = append(out, mutation{name: label + "/" + sid + " without " + what, target: target, overlapped: overlapped, apply: func(p policies) policies {
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
				return policies{roles: roles, bucket: p.bucket, functions: p.functions}
			}, role+"/"+fmt.Sprint(pol["name"]))
		}
	}
	each("bucket", p.bucket, func(p policies, doc map[string]any) policies {
		return policies{roles: p.roles, bucket: doc, functions: p.functions}
	}, "UploadBucketPolicy")
	for fn, pol := range p.functions {
		each("function:"+fn, pol, func(p policies, doc map[string]any) policies {
			functions := map[string]map[string]any{}
			for f, x := range p.functions {
				functions[f] = x
			}
			functions[fn] = doc
			return policies{roles: p.roles, bucket: p.bucket, functions: functions}
		}, fn)
	}
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
	if d == nil {
		t.Fatal("no parameter set with a JWT authorizer, tracing and a KMS key")
	}
	p := d.policies(t)
	es := append(append(allowedCalls(t, d), abuses(t, d)...), invocations(t, d)...)
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
			if e.role == m.target || e.resourcePolicy == m.target {
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
		if len(flipped) == 0 && r.m.overlapped {
			t.Logf("%s changes no decision: SAM's permission for another route covers it", r.m.name)
			continue
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
