package iamcheck

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// The deployment every simulation is of: a fixed account, region and
// stack, so that each policy resolves to the ARNs AWS would give it.
const (
	account   = "111122223333"
	region    = "eu-west-1"
	stackName = "onceupload"
	stackID   = "arn:aws:cloudformation:eu-west-1:111122223333:stack/onceupload/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
	// kmsKey is KmsKeyArn where the parameter set has a key: in the
	// stack's account, as the default key policy (keyPolicy) expects.
	kmsKey = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
)

// deployment is the template transformed by aws-sam-translator for one set
// of parameters, as CloudFormation would then deploy it.
type deployment struct {
	name   string
	params map[string]string
	cfn    struct {
		Parameters map[string]struct{ Default any } `json:"Parameters"`
		Conditions map[string]any                   `json:"Conditions"`
		Resources  map[string]struct {
			Type       string         `json:"Type"`
			Properties map[string]any `json:"Properties"`
		} `json:"Resources"`
	}
}

// parameterSets are the parameter values that change a policy or what the
// functions call: both access models (a JWT authorizer, or anonymous
// callers), with and without KmsKeyArn, tracing on and off.
func parameterSets() map[string]map[string]string {
	sets := map[string]map[string]string{}
	for _, access := range []string{"jwt", "anonymous"} {
		for _, kms := range []bool{false, true} {
			for _, tracing := range []string{"Active", "PassThrough"} {
				p := map[string]string{"Tracing": tracing, "AllowAnonymous": "true"}
				if access == "jwt" {
					p = map[string]string{"Tracing": tracing, "JwtIssuer": "https://issuer.example.com/", "JwtAudience": "client-id"}
				}
				name := access + " tracing=" + tracing
				if kms {
					p["KmsKeyArn"] = kmsKey
					name += " kms"
				}
				sets[name] = p
			}
		}
	}
	return sets
}

var (
	deploymentsOnce sync.Once
	deploymentsErr  error
	deploymentsList []*deployment
)

// deployments transforms template.yaml for every parameter set, once per
// test binary, the transforms in parallel (each takes about a second). It
// skips t when aws-sam-translator is missing, or fails it under
// REQUIRE_INTEGRATION=1.
func deployments(t *testing.T) []*deployment {
	t.Helper()
	deploymentsOnce.Do(func() {
		sets := parameterSets()
		var wg sync.WaitGroup
		errs := make([]error, 0, len(sets))
		var mu sync.Mutex
		for name, params := range sets {
			d := &deployment{name: name, params: params}
			deploymentsList = append(deploymentsList, d)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := d.transform(); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(errs) > 0 {
			deploymentsErr = errs[0]
		}
	})
	if deploymentsErr != nil {
		if strings.Contains(deploymentsErr.Error(), "No module named 'samtranslator'") || strings.Contains(deploymentsErr.Error(), "executable file not found") {
			if os.Getenv("REQUIRE_INTEGRATION") == "1" {
				t.Fatalf("aws-sam-translator is not installed: %v", deploymentsErr)
			}
			t.Skipf("aws-sam-translator is not installed (set REQUIRE_INTEGRATION=1 to fail instead): %v", deploymentsErr)
		}
		t.Fatal(deploymentsErr)
	}
	return deploymentsList
}

// transform runs the template tests' transform script (the translator as
// sam deploy runs it, offline).
func (d *deployment) transform() error {
	params, _ := json.Marshal(d.params)
	cmd := exec.Command("python3", "../templatecheck/testdata/transform.py", "../../../template.yaml", string(params))
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		return fmt.Errorf("transform %s: %v %s", d.name, err, stderr)
	}
	return json.Unmarshal(out, &d.cfn)
}

// noValue is what AWS::NoValue resolves to: removed from its list or map.
type noValue struct{}

// property returns a resource's property, resolved.
func (d *deployment) property(t *testing.T, logicalID string, path ...string) any {
	t.Helper()
	r, ok := d.cfn.Resources[logicalID]
	if !ok {
		t.Fatalf("%s: no resource %s", d.name, logicalID)
	}
	var v any = r.Properties
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: %s has no %s", d.name, logicalID, strings.Join(path, "."))
		}
		v = m[k]
	}
	out, err := d.resolve(v)
	if err != nil {
		t.Fatalf("%s: %s.%s: %v", d.name, logicalID, strings.Join(path, "."), err)
	}
	return out
}

// str is property as a string.
func (d *deployment) str(t *testing.T, logicalID string, path ...string) string {
	t.Helper()
	s, ok := d.property(t, logicalID, path...).(string)
	if !ok {
		t.Fatalf("%s: %s.%s is not a string", d.name, logicalID, strings.Join(path, "."))
	}
	return s
}

// resolve replaces every intrinsic function in v by its value in this
// deployment: parameters (given, else their default), pseudo parameters,
// the names and ARNs CloudFormation would give the resources, and the
// conditions. It fails on an intrinsic it does not know rather than guess.
func (d *deployment) resolve(v any) (any, error) {
	switch v := v.(type) {
	case []any:
		out := []any{}
		for _, x := range v {
			r, err := d.resolve(x)
			if err != nil {
				return nil, err
			}
			if _, skip := r.(noValue); !skip {
				out = append(out, r)
			}
		}
		return out, nil
	case map[string]any:
		if len(v) == 1 {
			for k, arg := range v {
				if k == "Ref" || k == "Condition" || strings.HasPrefix(k, "Fn::") {
					return d.intrinsic(k, arg)
				}
			}
		}
		out := map[string]any{}
		for k, x := range v {
			r, err := d.resolve(x)
			if err != nil {
				return nil, err
			}
			if _, skip := r.(noValue); !skip {
				out[k] = r
			}
		}
		return out, nil
	}
	return v, nil
}

func (d *deployment) intrinsic(fn string, arg any) (any, error) {
	args, _ := arg.([]any)
	switch fn {
	case "Ref":
		name, _ := arg.(string)
		return d.ref(name)
	case "Condition":
		name, _ := arg.(string)
		c, ok := d.cfn.Conditions[name]
		if !ok {
			return nil, fmt.Errorf("no condition %s", name)
		}
		return d.resolve(c)
	case "Fn::GetAtt":
		if s, ok := arg.(string); ok {
			args = []any{}
			for _, p := range strings.SplitN(s, ".", 2) {
				args = append(args, p)
			}
		}
		if len(args) != 2 {
			return nil, fmt.Errorf("Fn::GetAtt %v", arg)
		}
		return d.getAtt(fmt.Sprint(args[0]), fmt.Sprint(args[1]))
	case "Fn::Sub":
		return d.sub(arg)
	case "Fn::If":
		if len(args) != 3 {
			return nil, fmt.Errorf("Fn::If %v", arg)
		}
		c, err := d.intrinsic("Condition", args[0])
		if err != nil {
			return nil, err
		}
		if c == true {
			return d.resolve(args[1])
		}
		return d.resolve(args[2])
	}
	// The rest take resolved arguments.
	r, err := d.resolve(arg)
	if err != nil {
		return nil, err
	}
	args, _ = r.([]any)
	switch {
	case fn == "Fn::Equals" && len(args) == 2:
		return fmt.Sprint(args[0]) == fmt.Sprint(args[1]), nil
	case fn == "Fn::Not" && len(args) == 1:
		return args[0] == false, nil
	case fn == "Fn::And" || fn == "Fn::Or":
		every, some := true, false
		for _, a := range args {
			every = every && a == true
			some = some || a == true
		}
		if fn == "Fn::And" {
			return every, nil
		}
		return some, nil
	case fn == "Fn::Select" && len(args) == 2:
		i, err := index(args[0])
		list, _ := args[1].([]any)
		if err != nil || i >= len(list) {
			return nil, fmt.Errorf("Fn::Select %v", args)
		}
		return list[i], nil
	case fn == "Fn::Split" && len(args) == 2:
		out := []any{}
		for _, s := range strings.Split(fmt.Sprint(args[1]), fmt.Sprint(args[0])) {
			out = append(out, s)
		}
		return out, nil
	case fn == "Fn::Join" && len(args) == 2:
		list, _ := args[1].([]any)
		parts := make([]string, len(list))
		for i, p := range list {
			parts[i] = fmt.Sprint(p)
		}
		return strings.Join(parts, fmt.Sprint(args[0])), nil
	}
	return nil, fmt.Errorf("teach resolve %s %v", fn, arg)
}

func index(v any) (int, error) {
	switch v := v.(type) {
	case float64:
		return int(v), nil
	case string:
		var i int
		_, err := fmt.Sscan(v, &i)
		return i, err
	}
	return 0, fmt.Errorf("index %v", v)
}

func (d *deployment) ref(name string) (any, error) {
	switch name {
	case "AWS::AccountId":
		return account, nil
	case "AWS::Region":
		return region, nil
	case "AWS::Partition":
		return "aws", nil
	case "AWS::URLSuffix":
		return "amazonaws.com", nil
	case "AWS::StackName":
		return stackName, nil
	case "AWS::StackId":
		return stackID, nil
	case "AWS::NoValue":
		return noValue{}, nil
	}
	if p, ok := d.cfn.Parameters[name]; ok {
		v, given := d.params[name]
		if !given {
			v = fmt.Sprint(p.Default)
		}
		return v, nil
	}
	r, ok := d.cfn.Resources[name]
	if !ok {
		return nil, fmt.Errorf("Ref %s: no such parameter or resource", name)
	}
	// Ref is the physical id: the name the template gives, else the one
	// CloudFormation makes up from the stack and logical id.
	switch r.Type {
	case "AWS::Logs::LogGroup":
		return d.resolve(r.Properties["LogGroupName"])
	case "AWS::S3::Bucket":
		return d.resolve(r.Properties["BucketName"])
	case "AWS::SQS::Queue":
		return "https://sqs." + region + ".amazonaws.com/" + account + "/" + generatedName(name), nil
	}
	return generatedName(name), nil
}

// generatedName is the name CloudFormation gives a resource the template
// does not name.
func generatedName(logicalID string) string { return stackName + "-" + logicalID + "-1A2B3C4D5E6F" }

func (d *deployment) getAtt(logicalID, attr string) (any, error) {
	r, ok := d.cfn.Resources[logicalID]
	if !ok {
		return nil, fmt.Errorf("Fn::GetAtt %s.%s: no such resource", logicalID, attr)
	}
	name := generatedName(logicalID)
	arn := func(service, resource string) string {
		return "arn:aws:" + service + ":" + region + ":" + account + ":" + resource
	}
	switch r.Type + "." + attr {
	case "AWS::IAM::Role.Arn":
		return "arn:aws:iam::" + account + ":role/" + name, nil
	case "AWS::Lambda::Function.Arn":
		return arn("lambda", "function:"+name), nil
	case "AWS::SQS::Queue.Arn":
		return arn("sqs", name), nil
	case "AWS::SQS::Queue.QueueName":
		return name, nil
	case "AWS::DynamoDB::Table.Arn":
		return arn("dynamodb", "table/"+name), nil
	case "AWS::DynamoDB::Table.StreamArn":
		return arn("dynamodb", "table/"+name+"/stream/2026-12-04T10:00:00.000"), nil
	case "AWS::Logs::LogGroup.Arn":
		// As CloudFormation documents it: the group's ARN with ":*".
		group, err := d.ref(logicalID)
		return arn("logs", fmt.Sprintf("log-group:%v:*", group)), err
	case "AWS::S3::Bucket.Arn":
		bucket, err := d.ref(logicalID)
		return fmt.Sprintf("arn:aws:s3:::%v", bucket), err
	}
	return nil, fmt.Errorf("teach getAtt %s.%s (%s)", logicalID, attr, r.Type)
}

var subVar = regexp.MustCompile(`\$\{([^}]*)\}`)

// sub is Fn::Sub: a string, or a string and a map of its own variables.
func (d *deployment) sub(arg any) (any, error) {
	tmpl, _ := arg.(string)
	vars := map[string]any{}
	if list, ok := arg.([]any); ok && len(list) == 2 {
		tmpl, _ = list[0].(string)
		m, _ := list[1].(map[string]any)
		for k, v := range m {
			r, err := d.resolve(v)
			if err != nil {
				return nil, err
			}
			vars[k] = r
		}
	}
	var err error
	out := subVar.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := m[2 : len(m)-1]
		if strings.HasPrefix(name, "!") {
			return "${" + name[1:] + "}"
		}
		var v any
		var e error
		if x, ok := vars[name]; ok {
			v = x
		} else if id, attr, ok := strings.Cut(name, "."); ok {
			v, e = d.getAtt(id, attr)
		} else {
			v, e = d.ref(name)
		}
		if e != nil && err == nil {
			err = e
		}
		return fmt.Sprint(v)
	})
	return out, err
}

// The resolver against CloudFormation's documented results, on the forms
// template.yaml uses.
func TestResolve(t *testing.T) {
	d := &deployment{name: "unit", params: map[string]string{"KmsKeyArn": kmsKey}}
	d.cfn.Parameters = map[string]struct{ Default any }{"UploadPrefix": {Default: "uploads/"}, "KmsKeyArn": {Default: ""}}
	d.cfn.Conditions = map[string]any{"HasKmsKey": map[string]any{"Fn::Not": []any{map[string]any{"Fn::Equals": []any{map[string]any{"Ref": "KmsKeyArn"}, ""}}}}}
	d.cfn.Resources = map[string]struct {
		Type       string         `json:"Type"`
		Properties map[string]any `json:"Properties"`
	}{
		"Table": {Type: "AWS::DynamoDB::Table"},
		"Logs":  {Type: "AWS::Logs::LogGroup", Properties: map[string]any{"LogGroupName": map[string]any{"Fn::Sub": "/aws/lambda/${AWS::StackName}-presign"}}},
	}
	suffix := map[string]any{"Fn::Select": []any{4.0, map[string]any{"Fn::Split": []any{"-", map[string]any{"Fn::Select": []any{2.0, map[string]any{"Fn::Split": []any{"/", map[string]any{"Ref": "AWS::StackId"}}}}}}}}}
	for _, c := range []struct {
		in   any
		want string
	}{
		{map[string]any{"Fn::Sub": []any{"arn:${AWS::Partition}:s3:::b-${AWS::AccountId}-${AWS::Region}-${S}/${UploadPrefix}*", map[string]any{"S": suffix}}},
			"arn:aws:s3:::b-111122223333-eu-west-1-0c1d2e3f4a5b/uploads/*"},
		{map[string]any{"Fn::GetAtt": []any{"Table", "Arn"}}, "arn:aws:dynamodb:eu-west-1:111122223333:table/onceupload-Table-1A2B3C4D5E6F"},
		{map[string]any{"Fn::Sub": "${Table.Arn}/index/by_group"}, "arn:aws:dynamodb:eu-west-1:111122223333:table/onceupload-Table-1A2B3C4D5E6F/index/by_group"},
		{map[string]any{"Fn::Sub": "${Logs.Arn}"}, "arn:aws:logs:eu-west-1:111122223333:log-group:/aws/lambda/onceupload-presign:*"},
		{map[string]any{"Fn::Join": []any{",", []any{"a", map[string]any{"Ref": "UploadPrefix"}}}}, "a,uploads/"},
		{map[string]any{"Fn::If": []any{"HasKmsKey", map[string]any{"Ref": "KmsKeyArn"}, "none"}}, kmsKey},
		{[]any{"x", map[string]any{"Ref": "AWS::NoValue"}}, `["x"]`},
		{map[string]any{"Fn::Sub": "${!Literal}"}, "${Literal}"},
	} {
		got, err := d.resolve(c.in)
		if err != nil {
			t.Fatalf("%v: %v", c.in, err)
		}
		if s, ok := got.(string); !ok {
			b, _ := json.Marshal(got)
			got = string(b)
		} else {
			got = s
		}
		if got != c.want {
			t.Errorf("resolve %v\n got %v\nwant %s", c.in, got, c.want)
		}
	}
	if _, err := d.resolve(map[string]any{"Fn::ImportValue": "x"}); err == nil {
		t.Error("an unknown intrinsic resolved")
	}
}
