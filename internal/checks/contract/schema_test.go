package contract

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/onceupload/onceupload/pkg/api"
)

// The tests below hold pkg/api's wire types to openapi.yaml (and
// EventDetail to docs/events.schema.json), both ways, without a server:
// member names, JSON types, nesting, required members and enums. The Prism
// tests check only the answers their paths produce; these check every
// member of every schema.

// wireRow names the Go type of one component schema. A schema without a Go
// type says why it has none, so that a new schema is a decision, not a gap.
type wireRow struct {
	schema string
	goType reflect.Type
	// variant: the schema is one branch of a oneOf whose Go type is one
	// struct (Upload's states), and compared as part of that oneOf: the
	// struct may have members this branch leaves out, which must then be
	// omitted when empty.
	variant bool
	none    string
}

var wireTypes = []wireRow{
	{schema: "CreateRequest", goType: reflect.TypeFor[api.CreateRequest]()},
	{schema: "CompleteRequest", goType: reflect.TypeFor[api.CompleteRequest]()},
	{schema: "SignPartsRequest", goType: reflect.TypeFor[api.SignPartsRequest]()},
	{schema: "PartToSign", goType: reflect.TypeFor[api.PartToSign]()},
	{schema: "Upload", goType: reflect.TypeFor[api.Upload]()},
	{schema: "PendingUpload", goType: reflect.TypeFor[api.Upload](), variant: true},
	{schema: "PendingMultipartUpload", goType: reflect.TypeFor[api.Upload](), variant: true},
	{schema: "CompletedUpload", goType: reflect.TypeFor[api.Upload](), variant: true},
	{schema: "AbortedUpload", goType: reflect.TypeFor[api.Upload](), variant: true},
	{schema: "PutInstructions", goType: reflect.TypeFor[api.PutInstructions]()},
	{schema: "Multipart", goType: reflect.TypeFor[api.Multipart]()},
	{schema: "SignedParts", goType: reflect.TypeFor[api.SignedParts]()},
	{schema: "SignedPart", goType: reflect.TypeFor[api.SignedPart]()},
	{schema: "PartList", goType: reflect.TypeFor[api.PartList]()},
	{schema: "StoredPart", goType: reflect.TypeFor[api.StoredPart]()},
	{schema: "Error", goType: reflect.TypeFor[api.Error]()},
	// Scalars: the Go type of every member that refers to them.
	{schema: "ErrorCode", goType: reflect.TypeFor[string]()},
	{schema: "UploadId", goType: reflect.TypeFor[string]()},
	{schema: "StorageKey", goType: reflect.TypeFor[string]()},
	{schema: "HexSHA256", goType: reflect.TypeFor[string]()},
	{schema: "LowerHexSHA256", goType: reflect.TypeFor[string]()},
	{schema: "Base64SHA256", goType: reflect.TypeFor[string]()},
	{schema: "Bytes", goType: reflect.TypeFor[int64]()},
	{schema: "GatewayMessage", none: "API Gateway's own answer; the functions never write it"},
}

// eventTypes: the Go types whose schema is in docs/events.schema.json.
var eventTypes = map[string]reflect.Type{"detail": reflect.TypeFor[api.EventDetail]()}

const schemaPrefix = "#/components/schemas/"

func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile(spec)
	if err != nil {
		t.Fatalf("load %s: %v", spec, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("%s is not a valid OpenAPI document: %v", spec, err)
	}
	return doc
}

// loadEventSchema loads docs/events.schema.json, the schema of an event
// (its $defs hold the detail's).
func loadEventSchema(t *testing.T) *openapi3.Schema {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "events.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s openapi3.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("docs/events.schema.json: %v", err)
	}
	return &s
}

// TestWireTypesMatchSchemas compares every component schema with its Go
// type, member by member.
func TestWireTypesMatchSchemas(t *testing.T) {
	doc := loadSpec(t)
	c := &schemaChecker{named: map[string]reflect.Type{}, int64Format: true}
	for _, r := range wireTypes {
		if r.goType != nil {
			c.named[r.schema] = r.goType
		}
	}
	// The branches of each oneOf: a variant row is compared as one of them.
	branchOf := map[string]string{}
	for name, ref := range doc.Components.Schemas {
		for _, b := range ref.Value.OneOf {
			branchOf[strings.TrimPrefix(b.Ref, schemaPrefix)] = name
		}
	}
	listed := map[string]bool{}
	for _, r := range wireTypes {
		listed[r.schema] = true
		ref := doc.Components.Schemas[r.schema]
		switch {
		case ref == nil:
			t.Errorf("wireTypes lists %s, which openapi.yaml does not define", r.schema)
		case r.goType == nil && r.none == "":
			t.Errorf("wireTypes gives %s no Go type, and does not say why", r.schema)
		case r.variant:
			if parent := branchOf[r.schema]; parent == "" || c.named[parent] != r.goType {
				t.Errorf("%s: a variant of %v, but no oneOf of that Go type has it as a branch", r.schema, r.goType)
			}
		case r.goType != nil:
			t.Run(r.schema, func(t *testing.T) {
				c.t = t
				c.schema(r.schema, ref, r.goType)
			})
		}
	}
	for _, name := range sortedKeys(doc.Components.Schemas) {
		if !listed[name] {
			t.Errorf("openapi.yaml defines %s, which wireTypes does not list: name its pkg/api type, or say why it has none", name)
		}
	}

	events := loadEventSchema(t)
	for name, typ := range eventTypes {
		t.Run("events/"+name, func(t *testing.T) {
			c := &schemaChecker{t: t}
			def := events.Defs[name]
			if def == nil {
				t.Fatalf("docs/events.schema.json has no $defs/%s", name)
			}
			c.schema("events.schema.json $defs/"+name, def, typ)
		})
	}
}

// goOnlyTypes are pkg/api's exported types that are not wire bodies, with
// why.
var goOnlyTypes = map[string]string{
	"RequestError": "a decoder's refusal in Go; the API sends it as an Error body",
}

// TestEveryWireTypeHasSchema: every exported type of pkg/api is the Go type
// of a schema (or, in goOnlyTypes, says why it is none), so a new wire type
// cannot go undocumented.
func TestEveryWireTypeHasSchema(t *testing.T) {
	have := map[string]bool{}
	for _, r := range wireTypes {
		if r.goType != nil && r.goType.PkgPath() == reflect.TypeFor[api.Upload]().PkgPath() {
			have[r.goType.Name()] = true
		}
	}
	for _, typ := range eventTypes {
		have[typ.Name()] = true
	}
	for _, name := range apiDecls(t, token.TYPE) {
		if !have[name] && goOnlyTypes[name] == "" {
			t.Errorf("pkg/api's type %s is the Go type of no schema: add it to openapi.yaml (or docs/events.schema.json) and to wireTypes", name)
		}
	}
}

// operations names the Go types of every operation's request body and
// success answer (nil: none), as pkg/api's package comment lists them.
var operations = map[string]struct{ request, response reflect.Type }{
	"createUpload":   {reflect.TypeFor[api.CreateRequest](), reflect.TypeFor[api.Upload]()},
	"getUpload":      {nil, reflect.TypeFor[api.Upload]()},
	"signParts":      {reflect.TypeFor[api.SignPartsRequest](), reflect.TypeFor[api.SignedParts]()},
	"listParts":      {nil, reflect.TypeFor[api.PartList]()},
	"completeUpload": {reflect.TypeFor[api.CompleteRequest](), reflect.TypeFor[api.Upload]()},
	"abortUpload":    {nil, reflect.TypeFor[api.Upload]()},
}

// TestOperationsUseWireTypes: every operation's request body and success
// answer is a component schema whose Go type is the one the operation
// sends or answers, so no body escapes TestWireTypesMatchSchemas.
func TestOperationsUseWireTypes(t *testing.T) {
	doc := loadSpec(t)
	goType := map[string]reflect.Type{}
	for _, r := range wireTypes {
		goType[r.schema] = r.goType
	}
	// body checks one body: a $ref to a component of the Go type want.
	body := func(at string, content openapi3.Content, want reflect.Type) {
		t.Helper()
		if len(content) != 1 || content["application/json"] == nil {
			t.Errorf("%s: want one application/json body, got %d media types", at, len(content))
			return
		}
		ref := content["application/json"].Schema
		name, ok := strings.CutPrefix(ref.Ref, schemaPrefix)
		if !ok {
			t.Errorf("%s: the schema is written inline; refer to a component schema, which TestWireTypesMatchSchemas compares with its Go type", at)
			return
		}
		if got := goType[name]; got != want {
			t.Errorf("%s: is %s, whose Go type is %v; pkg/api's is %v", at, name, got, want)
		}
	}
	seen := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			at := method + " " + path
			want, ok := operations[op.OperationID]
			if !ok {
				t.Errorf("%s: operations does not list %q: name its Go types", at, op.OperationID)
				continue
			}
			seen[op.OperationID] = true
			switch {
			case op.RequestBody == nil && want.request != nil:
				t.Errorf("%s: has no request body; pkg/api's is %v", at, want.request)
			case op.RequestBody != nil && want.request == nil:
				t.Errorf("%s: has a request body; pkg/api has none", at)
			case op.RequestBody != nil:
				body(at+" request", op.RequestBody.Value.Content, want.request)
			}
			var ok2xx bool
			for status, resp := range op.Responses.Map() {
				if !strings.HasPrefix(status, "2") {
					continue
				}
				ok2xx = true
				body(at+" "+status, resp.Value.Content, want.response)
			}
			if !ok2xx {
				t.Errorf("%s: has no success answer", at)
			}
		}
	}
	for _, id := range sortedKeys(operations) {
		if !seen[id] {
			t.Errorf("operations lists %q, which openapi.yaml does not have", id)
		}
	}
}

// TestEnumsMatchConstants compares the spec's enums with pkg/api's
// constants of the same vocabulary, both ways.
func TestEnumsMatchConstants(t *testing.T) {
	doc := loadSpec(t)
	events := loadEventSchema(t)
	consts := apiConsts(t)

	var statuses []string
	for _, v := range doc.Components.Schemas["Upload"].Value.OneOf {
		statuses = append(statuses, enumOf(flat(v.Value.Properties["status"].Value))...)
	}
	detailStatus := enumOf(flat(events.Defs["detail"].Value.Properties["status"].Value))
	for _, tc := range []struct {
		what   string
		prefix string
		spec   []string
		subset bool // the spec may use only some of the constants
	}{
		{"ErrorCode's enum", "Code", enumOf(doc.Components.Schemas["ErrorCode"].Value), false},
		{"the error codes the responses list", "Code", responseCodes(doc), false},
		{"the statuses of Upload's branches", "Status", statuses, false},
		{"events.schema.json's detail status", "Status", detailStatus, true},
		{"events.schema.json's detail-type", "DetailType", enumOf(flat(events.Properties["detail-type"].Value)), false},
	} {
		t.Run(tc.what, func(t *testing.T) {
			var goVals []string
			for name, v := range consts {
				if strings.HasPrefix(name, tc.prefix) {
					goVals = append(goVals, v)
				}
			}
			missing, extra := diff(goVals, tc.spec)
			if len(missing) > 0 && !tc.subset {
				t.Errorf("pkg/api's %s* constants %q are not in %s", tc.prefix, missing, tc.what)
			}
			if len(extra) > 0 {
				t.Errorf("%s has %q, which no %s* constant of pkg/api has", tc.what, extra, tc.prefix)
			}
		})
	}
}

// TestLimitsMatchConstants: the bounds the spec states are pkg/api's.
func TestLimitsMatchConstants(t *testing.T) {
	doc := loadSpec(t)
	prop := func(schema, member string) *openapi3.Schema {
		s := doc.Components.Schemas[schema]
		if s == nil || s.Value.Properties[member] == nil {
			t.Fatalf("openapi.yaml has no %s.%s", schema, member)
		}
		return flat(s.Value.Properties[member].Value)
	}
	num := func(p *float64) float64 {
		if p == nil {
			return math.NaN()
		}
		return *p
	}
	count := func(p *uint64) float64 {
		if p == nil {
			return math.NaN()
		}
		return float64(*p)
	}
	for _, tc := range []struct {
		at   string
		got  float64
		want float64
	}{
		{"CreateRequest.filename maxLength", count(prop("CreateRequest", "filename").MaxLength), api.MaxFilenameLen},
		{"CreateRequest.contentType maxLength", count(prop("CreateRequest", "contentType").MaxLength), api.MaxMediaTypeLen},
		{"CreateRequest.size maximum", num(prop("CreateRequest", "size").Max), api.MaxMultipartBytes},
		{"CreateRequest.partSize minimum", num(prop("CreateRequest", "partSize").Min), api.MinPartSize},
		{"CreateRequest.partSize maximum", num(prop("CreateRequest", "partSize").Max), api.MaxPartSize},
		{"Multipart.partSize minimum", num(prop("Multipart", "partSize").Min), api.MinPartSize},
		{"Multipart.partSize maximum", num(prop("Multipart", "partSize").Max), api.MaxPartSize},
		{"Multipart.partCount maximum", num(prop("Multipart", "partCount").Max), api.MaxParts},
		{"PartToSign.partNumber maximum", num(prop("PartToSign", "partNumber").Max), api.MaxParts},
		{"SignedPart.partNumber maximum", num(prop("SignedPart", "partNumber").Max), api.MaxParts},
		{"StoredPart.partNumber maximum", num(prop("StoredPart", "partNumber").Max), api.MaxParts},
		{"SignPartsRequest.parts maxItems", count(prop("SignPartsRequest", "parts").MaxItems), api.MaxPartsPerSign},
		{"CompleteRequest.parts maxItems", count(prop("CompleteRequest", "parts").MaxItems), api.MaxParts},
	} {
		if tc.got != tc.want {
			t.Errorf("openapi.yaml's %s is %v, pkg/api says %v", tc.at, tc.got, tc.want)
		}
	}
}

// schemaChecker compares schemas with Go types and reports each difference
// at its place ("CreateRequest.parts[].partNumber").
type schemaChecker struct {
	t     *testing.T
	named map[string]reflect.Type
	// int64Format: an int64 must say `format: int64`, an OpenAPI format
	// (JSON Schema has none for it).
	int64Format bool
}

func (c *schemaChecker) errorf(at, format string, args ...any) {
	c.t.Helper()
	c.t.Errorf("%s: %s", at, fmt.Sprintf(format, args...))
}

// schema compares one schema, reached through ref, with typ.
func (c *schemaChecker) schema(at string, ref *openapi3.SchemaRef, typ reflect.Type) {
	c.t.Helper()
	if name, ok := strings.CutPrefix(ref.Ref, schemaPrefix); ok {
		if want := c.named[name]; want != nil && want.Kind() == reflect.Struct && typ != want {
			c.errorf(at, "refers to %s, whose Go type is %v, but the Go type here is %v", name, want, typ)
			return
		}
	}
	s := flat(ref.Value)
	if len(s.OneOf) > 0 {
		c.union(at, s, typ)
		return
	}
	// Conditions that only make optional members required (CreateRequest's
	// "sha256 without partSize") change no member; anything more in them
	// would need a comparison of its own.
	conds := map[string]*openapi3.SchemaRef{"if": s.If, "then": s.Then, "else": s.Else}
	for i, a := range s.AnyOf {
		conds["anyOf/"+strconv.Itoa(i)] = a
	}
	for _, name := range sortedKeys(conds) {
		r := conds[name]
		if r == nil {
			continue
		}
		v := r.Value
		if r.Ref != "" || v.Type != nil || len(v.Properties) > 0 || len(v.AllOf)+len(v.AnyOf)+len(v.OneOf) > 0 || v.Not != nil {
			c.errorf(at, "%s says more than a required list, which this test cannot compare", name)
		}
		for _, req := range v.Required {
			if s.Properties[req] == nil {
				c.errorf(at, "%s requires %q, which is not a property", name, req)
			}
		}
	}
	jt := jsonType(s)
	want, ok := goJSONType(typ)
	if !ok {
		c.errorf(at, "the Go type %v has no JSON type this test knows", typ)
		return
	}
	if jt != want {
		c.errorf(at, "the schema's type is %q, the Go type %v is %q in JSON", jt, typ, want)
		return
	}
	for _, v := range enumValues(s) {
		if got, _ := goJSONType(reflect.TypeOf(v)); got != want {
			c.errorf(at, "enum value %v is not of the Go type %v", v, typ)
		}
	}
	switch typ.Kind() {
	case reflect.Int64:
		if c.int64Format && s.Format != "int64" {
			c.errorf(at, "the Go type is int64 but the schema's format is %q, not int64", s.Format)
		}
	case reflect.Int, reflect.Int32, reflect.Int16, reflect.Int8:
		// An int is 32 bits on some platforms: the schema must bound it.
		if s.Format == "int64" || s.Max == nil || *s.Max > math.MaxInt32 || s.Min == nil || *s.Min < math.MinInt32 {
			c.errorf(at, "the Go type is %v, so the schema must bound it within 32 bits, and not say int64", typ)
		}
	case reflect.Slice, reflect.Array:
		if s.Items == nil {
			c.errorf(at, "an array without items")
			return
		}
		c.schema(at+"[]", s.Items, typ.Elem())
	case reflect.Map:
		ap := s.AdditionalProperties.Schema
		if ap == nil {
			c.errorf(at, "the Go type is %v but the schema does not say what its additional properties are", typ)
			return
		}
		c.schema(at+"{}", ap, typ.Elem())
		for _, name := range sortedKeys(s.Properties) {
			c.schema(at+"."+name, s.Properties[name], typ.Elem())
		}
	case reflect.Struct:
		c.object(at, s, typ)
	}
}

// object compares an object schema with a struct, both ways.
func (c *schemaChecker) object(at string, s *openapi3.Schema, typ reflect.Type) {
	c.t.Helper()
	// The decoders refuse unknown members and the encoders write only the
	// struct's: the schema must be closed too.
	if s.AdditionalProperties.Has == nil || *s.AdditionalProperties.Has {
		c.errorf(at, "the Go type is the struct %v, but the schema does not say additionalProperties: false", typ)
	}
	fields := jsonFields(typ)
	for _, f := range fields {
		p := s.Properties[f.name]
		if p == nil {
			c.errorf(at, "the Go field %v.%s (%q) is not in the schema", typ, f.goName, f.name)
			continue
		}
		c.schema(at+"."+f.name, p, f.typ)
		required := slices.Contains(s.Required, f.name)
		if required && f.optional {
			c.errorf(at, "%q is required, but the Go field %v.%s is omitted when empty", f.name, typ, f.goName)
		}
		if !required && !f.optional {
			c.errorf(at, "%q is optional, but the Go field %v.%s is always written: required it, or omitempty", f.name, typ, f.goName)
		}
	}
	for _, name := range sortedKeys(s.Properties) {
		if !slices.ContainsFunc(fields, func(f jsonField) bool { return f.name == name }) {
			c.errorf(at, "the schema's %q is no member of the Go type %v", name, typ)
		}
	}
	for _, name := range s.Required {
		if s.Properties[name] == nil {
			c.errorf(at, "requires %q, which is not a property", name)
		}
	}
}

// variant compares one branch of a oneOf with the struct of the whole
// union: every member of the branch is a field, and every field the branch
// leaves out is omitted when empty.
func (c *schemaChecker) variant(at string, s *openapi3.Schema, typ reflect.Type) {
	c.t.Helper()
	s = flat(s)
	if jsonType(s) != "object" || typ.Kind() != reflect.Struct {
		c.errorf(at, "a oneOf branch of the struct %v must be an object", typ)
		return
	}
	if s.AdditionalProperties.Has == nil || *s.AdditionalProperties.Has {
		c.errorf(at, "a branch of the struct %v must say additionalProperties: false", typ)
	}
	fields := jsonFields(typ)
	for _, name := range sortedKeys(s.Properties) {
		i := slices.IndexFunc(fields, func(f jsonField) bool { return f.name == name })
		if i < 0 {
			c.errorf(at, "the schema's %q is no member of the Go type %v", name, typ)
			continue
		}
		c.schema(at+"."+name, s.Properties[name], fields[i].typ)
	}
	for _, f := range fields {
		if s.Properties[f.name] == nil && !f.optional {
			c.errorf(at, "the Go field %v.%s (%q) is always written, but this branch has no such member", typ, f.goName, f.name)
		}
	}
	for _, name := range s.Required {
		if s.Properties[name] == nil {
			c.errorf(at, "requires %q, which is not a property", name)
		}
	}
}

// union compares a oneOf of objects with the one struct that encodes all
// of them: each branch as a variant, and the struct's fields with the
// members of all branches, both ways. A field is always written exactly
// when every branch requires it.
func (c *schemaChecker) union(at string, s *openapi3.Schema, typ reflect.Type) {
	c.t.Helper()
	if typ.Kind() != reflect.Struct {
		c.errorf(at, "a oneOf whose Go type %v is not a struct: this test cannot compare it", typ)
		return
	}
	members := map[string]int{} // how many branches require it
	inAny := map[string]bool{}
	for i, b := range s.OneOf {
		name := strings.TrimPrefix(b.Ref, schemaPrefix)
		if name == "" {
			name = strconv.Itoa(i)
		}
		if want := c.named[name]; want != nil && want != typ {
			c.errorf(at, "oneOf refers to %s, whose Go type is %v, not %v", name, want, typ)
		}
		c.variant(at+" oneOf "+name, b.Value, typ)
		v := flat(b.Value)
		for p := range v.Properties {
			inAny[p] = true
		}
		for _, r := range v.Required {
			members[r]++
		}
	}
	fields := jsonFields(typ)
	for _, f := range fields {
		if !inAny[f.name] {
			c.errorf(at, "the Go field %v.%s (%q) is in no branch of the oneOf", typ, f.goName, f.name)
			continue
		}
		always := members[f.name] == len(s.OneOf)
		if always && f.optional {
			c.errorf(at, "every branch requires %q, but the Go field %v.%s is omitted when empty", f.name, typ, f.goName)
		}
		if !always && !f.optional {
			c.errorf(at, "some branch leaves out %q, but the Go field %v.%s is always written", f.name, typ, f.goName)
		}
	}
}

// jsonField is a member of a struct's JSON encoding.
type jsonField struct {
	name, goName string
	typ          reflect.Type
	optional     bool // omitempty or omitzero: absent when empty
}

// jsonFields lists the JSON members of a struct as encoding/json writes
// them: embedded structs without a name flattened, "-" left out.
func jsonFields(typ reflect.Type) []jsonField {
	var out []jsonField
	for f := range typ.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		ft := f.Type
		optional := slices.Contains(strings.Split(opts, ","), "omitempty") || slices.Contains(strings.Split(opts, ","), "omitzero")
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		out = append(out, jsonField{name: name, goName: f.Name, typ: ft, optional: optional})
	}
	return out
}

// goJSONType is the JSON type a value of t is written as.
func goJSONType(t reflect.Type) (string, bool) {
	switch t.Kind() {
	case reflect.String:
		return "string", true
	case reflect.Bool:
		return "boolean", true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer", true
	case reflect.Float32, reflect.Float64:
		return "number", true
	case reflect.Slice, reflect.Array:
		return "array", true
	case reflect.Map:
		return "object", t.Key().Kind() == reflect.String
	case reflect.Struct:
		return "object", true
	case reflect.Pointer:
		return goJSONType(t.Elem())
	}
	return "", false
}

// jsonType is a schema's one JSON type: its type, or that of its enum or
// const when it names none. "" when there is none, or more than one.
func jsonType(s *openapi3.Schema) string {
	if s.Type != nil {
		if len(*s.Type) != 1 {
			return ""
		}
		return (*s.Type)[0]
	}
	var jt string
	for _, v := range enumValues(s) {
		t, _ := goJSONType(reflect.TypeOf(v))
		if jt != "" && t != jt {
			return ""
		}
		jt = t
	}
	return jt
}

// enumValues is the values a schema allows, from enum or const.
func enumValues(s *openapi3.Schema) []any {
	out := slices.Clone(s.Enum)
	if s.Const != nil {
		out = append(out, s.Const)
	}
	return out
}

// enumOf is enumValues as text.
func enumOf(s *openapi3.Schema) []string {
	var out []string
	for _, v := range enumValues(s) {
		out = append(out, fmt.Sprint(v))
	}
	return out
}

// flat is s with its allOf merged in: a member written as
// `allOf: [{$ref: X}]` with its own description is X.
func flat(s *openapi3.Schema) *openapi3.Schema {
	if len(s.AllOf) == 0 {
		return s
	}
	m := *s
	m.AllOf = nil
	m.Properties = maps.Clone(s.Properties)
	if m.Properties == nil {
		m.Properties = openapi3.Schemas{}
	}
	for _, a := range s.AllOf {
		f := flat(a.Value)
		if m.Type == nil {
			m.Type = f.Type
		}
		if m.Format == "" {
			m.Format = f.Format
		}
		if m.Items == nil {
			m.Items = f.Items
		}
		if m.AdditionalProperties.Has == nil && m.AdditionalProperties.Schema == nil {
			m.AdditionalProperties = f.AdditionalProperties
		}
		if m.Enum == nil {
			m.Enum = f.Enum
		}
		if m.Const == nil {
			m.Const = f.Const
		}
		if m.Min == nil {
			m.Min = f.Min
		}
		if m.Max == nil {
			m.Max = f.Max
		}
		for k, v := range f.Properties {
			if m.Properties[k] == nil {
				m.Properties[k] = v
			}
		}
		m.Required = append(m.Required, f.Required...)
		m.OneOf = append(m.OneOf, f.OneOf...)
		m.AnyOf = append(m.AnyOf, f.AnyOf...)
	}
	return &m
}

// responseCodes are the error codes that the responses of every operation
// list (as `error: enum: [...]` beside the Error schema).
func responseCodes(doc *openapi3.T) []string {
	seen := map[string]bool{}
	var walk func(*openapi3.SchemaRef)
	walk = func(r *openapi3.SchemaRef) {
		if r == nil || r.Value == nil {
			return
		}
		s := r.Value
		if e := s.Properties["error"]; e != nil && r.Ref == "" {
			for _, v := range enumOf(e.Value) {
				seen[v] = true
			}
		}
		for _, list := range []openapi3.SchemaRefs{s.AllOf, s.OneOf, s.AnyOf} {
			for _, b := range list {
				walk(b)
			}
		}
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, resp := range op.Responses.Map() {
				for _, mt := range resp.Value.Content {
					walk(mt.Schema)
				}
			}
		}
	}
	return sortedKeys(seen)
}

// apiDecls lists the exported names pkg/api declares of one kind (types or
// constants), from its source: reflect cannot list a package's types.
func apiDecls(t *testing.T, tok token.Token) []string {
	var names []string
	for _, spec := range apiSpecs(t, tok) {
		switch s := spec.(type) {
		case *ast.TypeSpec:
			if s.Name.IsExported() {
				names = append(names, s.Name.Name)
			}
		case *ast.ValueSpec:
			for _, n := range s.Names {
				if n.IsExported() {
					names = append(names, n.Name)
				}
			}
		}
	}
	return names
}

// apiConsts maps pkg/api's exported string constants to their values.
func apiConsts(t *testing.T) map[string]string {
	out := map[string]string{}
	for _, spec := range apiSpecs(t, token.CONST) {
		s := spec.(*ast.ValueSpec)
		for i, n := range s.Names {
			if i >= len(s.Values) {
				continue
			}
			lit, ok := s.Values[i].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING || !n.IsExported() {
				continue
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatal(err)
			}
			out[n.Name] = v
		}
	}
	return out
}

func apiSpecs(t *testing.T, tok token.Token) []ast.Spec {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "pkg", "api")
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var specs []ast.Spec
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == tok {
				specs = append(specs, g.Specs...)
			}
		}
	}
	if len(specs) == 0 {
		t.Fatalf("no %s declarations in %s", tok, dir)
	}
	return specs
}

// diff returns what is in want but not got, and in got but not want.
func diff(want, got []string) (missing, extra []string) {
	for _, w := range want {
		if !slices.Contains(got, w) {
			missing = append(missing, w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) && !slices.Contains(extra, g) {
			extra = append(extra, g)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	return missing, extra
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
