package templatecheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// readYAML parses a template as a YAML node tree, its short-form intrinsic
// functions (!Ref, !GetAtt, ...) kept as tags.
func readYAML(t *testing.T, path string) *yaml.Node {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		t.Fatalf("%s: not a YAML mapping", path)
	}
	return doc.Content[0]
}

// get returns the value of key in a mapping node, or nil.
func get(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// keys returns a mapping node's keys.
func keys(n *yaml.Node) []string {
	var ks []string
	if n != nil && n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			ks = append(ks, n.Content[i].Value)
		}
	}
	return ks
}

// intrinsics lists where n uses an intrinsic function, in either form:
// a short-form tag (!Sub) or a long-form key (Fn::Sub, Ref, Condition).
func intrinsics(n *yaml.Node, path string) []string {
	var found []string
	if strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") {
		found = append(found, path+": "+n.Tag)
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if strings.HasPrefix(k, "Fn::") || k == "Ref" || k == "Condition" {
				found = append(found, path+"."+k)
			}
			found = append(found, intrinsics(n.Content[i+1], path+"."+k)...)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			found = append(found, intrinsics(c, path+"["+strconv.Itoa(i)+"]")...)
		}
	}
	return found
}

// The metadata sam publish sends to the AWS Serverless Application
// Repository is complete, literal (the repository evaluates no intrinsic
// function there) and within the repository's limits, and the files it
// names exist, so that publishing fails on none of them.
func TestServerlessRepoMetadata(t *testing.T) {
	tpl := readYAML(t, "../../../template.yaml")
	md := get(get(tpl, "Metadata"), "AWS::ServerlessRepo::Application")
	if md == nil {
		t.Fatal("template.yaml has no Metadata.AWS::ServerlessRepo::Application")
	}
	for _, where := range intrinsics(md, "AWS::ServerlessRepo::Application") {
		t.Errorf("an intrinsic function in the metadata, which the repository does not evaluate: %s", where)
	}
	var meta map[string]any
	if err := md.Decode(&meta); err != nil {
		t.Fatal(err)
	}
	str := func(field string) string {
		s, ok := meta[field].(string)
		if !ok || strings.TrimSpace(s) == "" {
			t.Errorf("metadata field %s is missing or not a string: %v", field, meta[field])
		}
		return s
	}
	for _, field := range []string{"Name", "Description", "Author", "SpdxLicenseId", "LicenseUrl", "ReadmeUrl", "SemanticVersion", "SourceCodeUrl"} {
		str(field)
	}
	if name := str("Name"); len(name) > 140 {
		t.Errorf("Name is %d characters, the repository takes 140", len(name))
	}
	if d := str("Description"); len(d) > 256 {
		t.Errorf("Description is %d characters, the repository takes 256", len(d))
	}
	// A name, never a person: lower case letters, digits and single hyphens.
	if a := str("Author"); !regexp.MustCompile(`^[a-z0-9](([a-z0-9]|-[a-z0-9])*)$`).MatchString(a) || len(a) > 127 {
		t.Errorf("Author %q is not a lower-case name (letters, digits, single hyphens, at most 127)", a)
	}
	if v := str("SemanticVersion"); !regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`).MatchString(v) {
		t.Errorf("SemanticVersion %q is not a semantic version", v)
	}
	if u := str("SourceCodeUrl"); !strings.HasPrefix(u, "https://") {
		t.Errorf("SourceCodeUrl %q is not an https URL", u)
	}
	// The license named is the one the repository holds.
	if id := str("SpdxLicenseId"); id != "Apache-2.0" {
		t.Errorf("SpdxLicenseId is %q, LICENSE is Apache-2.0", id)
	}
	// Relative paths are files sam package uploads: they must exist.
	for _, field := range []string{"LicenseUrl", "ReadmeUrl"} {
		u := str(field)
		if strings.Contains(u, "://") {
			continue
		}
		if _, err := os.Stat(filepath.Join("../../..", u)); err != nil {
			t.Errorf("%s %q: %v", field, u, err)
		}
	}
	if lic, err := os.ReadFile("../../../LICENSE"); err != nil || !strings.Contains(string(lic), "Apache License") || !strings.Contains(string(lic), "Version 2.0") {
		t.Errorf("LICENSE is not the Apache License 2.0 that SpdxLicenseId names (%v)", err)
	}
	labels, ok := meta["Labels"].([]any)
	if !ok || len(labels) == 0 || len(labels) > 10 {
		t.Errorf("Labels must list 1 to 10 labels: %v", meta["Labels"])
	}
	for _, l := range labels {
		if s, ok := l.(string); !ok || !regexp.MustCompile(`^[a-zA-Z0-9+\-_:/@]{1,127}$`).MatchString(s) {
			t.Errorf("label %v is not 1 to 127 of [a-zA-Z0-9+-_:/@]", l)
		}
	}
}

// examples/upload-events/with-onceupload.yaml nests template.yaml (and the
// consumer beside it) as AWS::Serverless::Application resources. Every
// parameter it passes is a parameter of the nested template, every
// parameter without a default is passed, and every output it reads with
// GetAtt App.Outputs.Name is an output of that template, without a
// condition that could leave it out. It fails when either side drifts.
func TestNestedExampleMatchesTemplate(t *testing.T) {
	const example = "../../../examples/upload-events/with-onceupload.yaml"
	tpl := readYAML(t, example)
	nested := map[string]*yaml.Node{} // logical id -> nested template
	nestsOnceupload := ""
	for _, id := range keys(get(tpl, "Resources")) {
		r := get(get(tpl, "Resources"), id)
		if typ := get(r, "Type"); typ == nil || typ.Value != "AWS::Serverless::Application" {
			continue
		}
		loc := get(get(r, "Properties"), "Location")
		if loc == nil || loc.Kind != yaml.ScalarNode || loc.Tag != "!!str" {
			t.Errorf("%s: Location is not a local path", id)
			continue
		}
		path := filepath.Join(filepath.Dir(example), loc.Value)
		if filepath.Clean(path) == filepath.Clean("../../../template.yaml") {
			nestsOnceupload = id
		}
		child := readYAML(t, path)
		nested[id] = child
		params := get(child, "Parameters")
		passed := get(get(r, "Properties"), "Parameters")
		for _, p := range keys(passed) {
			if get(params, p) == nil {
				t.Errorf("%s passes %s, which is no parameter of %s", id, p, loc.Value)
			}
		}
		for _, p := range keys(params) {
			if get(get(params, p), "Default") == nil && get(passed, p) == nil {
				t.Errorf("%s does not pass %s, which %s requires (it has no default)", id, p, loc.Value)
			}
		}
	}
	if nestsOnceupload == "" {
		t.Fatalf("%s nests no AWS::Serverless::Application with Location ../../template.yaml", example)
	}
	read := map[string]bool{}
	var walk func(n *yaml.Node)
	check := func(app, attr string) {
		child, ok := nested[app]
		out, isOutput := strings.CutPrefix(attr, "Outputs.")
		if !ok || !isOutput {
			return
		}
		read[app] = true
		o := get(get(child, "Outputs"), out)
		switch {
		case o == nil:
			t.Errorf("%s reads %s.Outputs.%s, which the nested template does not output", example, app, out)
		case get(o, "Condition") != nil:
			t.Errorf("%s reads %s.Outputs.%s, which exists only under condition %s", example, app, out, get(o, "Condition").Value)
		}
	}
	walk = func(n *yaml.Node) {
		if n.Tag == "!GetAtt" {
			switch n.Kind {
			case yaml.ScalarNode:
				if app, attr, ok := strings.Cut(n.Value, "."); ok {
					check(app, attr)
				}
			case yaml.SequenceNode:
				if len(n.Content) == 2 {
					check(n.Content[0].Value, n.Content[1].Value)
				}
			}
		}
		if g := get(n, "Fn::GetAtt"); g != nil && g.Kind == yaml.SequenceNode && len(g.Content) == 2 {
			check(g.Content[0].Value, g.Content[1].Value)
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(tpl)
	if !read[nestsOnceupload] {
		t.Errorf("%s reads none of onceupload's outputs", example)
	}
}
