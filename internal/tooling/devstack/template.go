package devstack

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Spec is what the local stack takes from template.yaml, so that the table,
// the bucket, the routes and CORS are what a deployment gets, not a copy.
type Spec struct {
	Table  TableSpec
	Bucket BucketSpec
	API    APISpec
	// Routes map "METHOD /path" to the function serving it.
	Routes []Route
	// ObjectCreatedFunction is the function on s3:ObjectCreated:*.
	ObjectCreatedFunction string
	// Parameters are the template parameters' defaults.
	Parameters map[string]string
	// Timeouts are the functions' timeouts (Globals, or their own).
	Timeouts map[string]time.Duration
	// Stream is the function on the table's stream, if there is one.
	Stream *StreamSpec
}

// StreamSpec is a function's DynamoDB stream event source: what the
// stack's poller does as Lambda's event source mapping would.
type StreamSpec struct {
	Function string
	// StartingPosition is TRIM_HORIZON or LATEST.
	StartingPosition string
	BatchSize        int
	// MaxRetries is MaximumRetryAttempts: a batch whose function reports a
	// failure is retried this many times, then dropped (AWS would send it
	// to the on-failure destination).
	MaxRetries int
	// Filters are the filter criteria's patterns, decoded: an event
	// passes if any matches.
	Filters []map[string]any
	// ReportBatchItemFailures is set when FunctionResponseTypes has it:
	// only then does a reported failure retry the batch from that record.
	ReportBatchItemFailures bool
}

// TableSpec is the idempotency table's shape.
type TableSpec struct {
	PartitionKey string
	KeyType      string // S, N or B
	TTLAttribute string
	BillingMode  string
	// StreamViewType is the table's stream (NEW_AND_OLD_IMAGES…), or "".
	StreamViewType string
	LogicalID      string
	AttributeDefs  map[string]string
	// Indexes are its global secondary indexes.
	Indexes []IndexSpec
}

// IndexSpec is a global secondary index: its keys (SortKey may be empty),
// their types in TableSpec.AttributeDefs, and its projection.
type IndexSpec struct {
	Name, PartitionKey, SortKey string
	ProjectionType              string   // KEYS_ONLY, INCLUDE or ALL
	NonKeyAttributes            []string // INCLUDE's
}

// BucketSpec is the upload bucket's CORS rules (origins come from the
// stack's ALLOWED_ORIGINS, as they come from a parameter in AWS).
type BucketSpec struct {
	LogicalID string
	CORSRules []CORSRule
}

// CORSRule is one bucket CORS rule.
type CORSRule struct {
	AllowedMethods []string `yaml:"AllowedMethods"`
	AllowedHeaders []string `yaml:"AllowedHeaders"`
	ExposedHeaders []string `yaml:"ExposedHeaders"`
	MaxAge         int32    `yaml:"MaxAge"`
}

// APISpec is the HTTP API's CorsConfiguration.
type APISpec struct {
	AllowHeaders  []string `yaml:"AllowHeaders"`
	ExposeHeaders []string `yaml:"ExposeHeaders"`
	AllowMethods  []string `yaml:"AllowMethods"`
	MaxAge        int      `yaml:"MaxAge"`
}

// Route is one HttpApi event of a function.
type Route struct {
	Method   string
	Path     string // with {param} segments
	Function string // logical id
}

// Key is the route key as API Gateway writes it: "POST /uploads".
func (r Route) Key() string { return r.Method + " " + r.Path }

type cfnTemplate struct {
	Globals struct {
		Function struct {
			Timeout int `yaml:"Timeout"`
		} `yaml:"Function"`
	} `yaml:"Globals"`
	Parameters map[string]struct {
		Default yaml.Node `yaml:"Default"`
	} `yaml:"Parameters"`
	Resources map[string]struct {
		Type       string    `yaml:"Type"`
		Properties yaml.Node `yaml:"Properties"`
	} `yaml:"Resources"`
}

// LoadSpec reads a SAM template. Intrinsic functions (!Ref, !Sub, …) are
// only read where a literal is expected; the values the stack fills in
// itself (names, origins) are skipped.
func LoadSpec(path string) (*Spec, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read template: %w", err)
	}
	var tpl cfnTemplate
	if err := yaml.Unmarshal(raw, &tpl); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	spec := &Spec{Parameters: map[string]string{}, Timeouts: map[string]time.Duration{}}
	for name, p := range tpl.Parameters {
		if p.Default.Kind == yaml.ScalarNode {
			spec.Parameters[name] = p.Default.Value
		}
	}
	for id, res := range tpl.Resources {
		props := &res.Properties
		var err error
		switch res.Type {
		case "AWS::DynamoDB::Table":
			err = readTable(id, props, &spec.Table)
		case "AWS::S3::Bucket":
			err = readBucket(id, props, spec)
		case "AWS::Serverless::HttpApi":
			var p struct {
				CorsConfiguration APISpec `yaml:"CorsConfiguration"`
			}
			err = decodeLiteral(props, &p)
			spec.API = p.CorsConfiguration
		case "AWS::Serverless::Function":
			err = readFunction(id, props, spec)
			if spec.Timeouts[id] == 0 {
				spec.Timeouts[id] = time.Duration(tpl.Globals.Function.Timeout) * time.Second
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, id, err)
		}
	}
	switch {
	case spec.Table.PartitionKey == "":
		return nil, fmt.Errorf("%s: no DynamoDB table with a partition key", path)
	case spec.Bucket.LogicalID == "":
		return nil, fmt.Errorf("%s: no S3 bucket", path)
	case len(spec.Routes) == 0:
		return nil, fmt.Errorf("%s: no HttpApi routes", path)
	case spec.ObjectCreatedFunction == "":
		return nil, fmt.Errorf("%s: no function on s3:ObjectCreated", path)
	}
	return spec, nil
}

// decodeLiteral decodes n into v, blanking tagged (intrinsic) values first,
// which the stack does not evaluate.
func decodeLiteral(n *yaml.Node, v any) error {
	return stripIntrinsics(n).Decode(v)
}

func stripIntrinsics(n *yaml.Node) *yaml.Node {
	c := *n
	if strings.HasPrefix(c.Tag, "!") && !strings.HasPrefix(c.Tag, "!!") { // !Ref, !Sub…; "!!str" is a core tag
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: ""}
	}
	if len(c.Content) > 0 {
		c.Content = make([]*yaml.Node, len(n.Content))
		for i, child := range n.Content {
			c.Content[i] = stripIntrinsics(child)
		}
	}
	return &c
}

func readTable(id string, props *yaml.Node, t *TableSpec) error {
	var p struct {
		BillingMode          string `yaml:"BillingMode"`
		AttributeDefinitions []struct {
			AttributeName string `yaml:"AttributeName"`
			AttributeType string `yaml:"AttributeType"`
		} `yaml:"AttributeDefinitions"`
		KeySchema []struct {
			AttributeName string `yaml:"AttributeName"`
			KeyType       string `yaml:"KeyType"`
		} `yaml:"KeySchema"`
		TimeToLiveSpecification struct {
			AttributeName string `yaml:"AttributeName"`
		} `yaml:"TimeToLiveSpecification"`
		StreamSpecification struct {
			StreamViewType string `yaml:"StreamViewType"`
		} `yaml:"StreamSpecification"`
		GlobalSecondaryIndexes []struct {
			IndexName string `yaml:"IndexName"`
			KeySchema []struct {
				AttributeName string `yaml:"AttributeName"`
				KeyType       string `yaml:"KeyType"`
			} `yaml:"KeySchema"`
			Projection struct {
				ProjectionType   string   `yaml:"ProjectionType"`
				NonKeyAttributes []string `yaml:"NonKeyAttributes"`
			} `yaml:"Projection"`
		} `yaml:"GlobalSecondaryIndexes"`
	}
	if err := decodeLiteral(props, &p); err != nil {
		return err
	}
	t.LogicalID, t.BillingMode, t.TTLAttribute = id, p.BillingMode, p.TimeToLiveSpecification.AttributeName
	t.StreamViewType = p.StreamSpecification.StreamViewType
	t.AttributeDefs = map[string]string{}
	for _, d := range p.AttributeDefinitions {
		t.AttributeDefs[d.AttributeName] = d.AttributeType
	}
	for _, k := range p.KeySchema {
		if k.KeyType == "HASH" {
			t.PartitionKey, t.KeyType = k.AttributeName, t.AttributeDefs[k.AttributeName]
		} else {
			return fmt.Errorf("key %s: only a partition key is supported", k.AttributeName)
		}
	}
	for _, gsi := range p.GlobalSecondaryIndexes {
		ix := IndexSpec{Name: gsi.IndexName, ProjectionType: gsi.Projection.ProjectionType, NonKeyAttributes: gsi.Projection.NonKeyAttributes}
		for _, k := range gsi.KeySchema {
			if t.AttributeDefs[k.AttributeName] == "" {
				return fmt.Errorf("index %s: key %s has no attribute definition", gsi.IndexName, k.AttributeName)
			}
			switch k.KeyType {
			case "HASH":
				ix.PartitionKey = k.AttributeName
			case "RANGE":
				ix.SortKey = k.AttributeName
			}
		}
		if ix.Name == "" || ix.PartitionKey == "" {
			return fmt.Errorf("index %q: a name and a partition key are required", ix.Name)
		}
		t.Indexes = append(t.Indexes, ix)
	}
	return nil
}

func readBucket(id string, props *yaml.Node, spec *Spec) error {
	// The notifications keep their tags (!GetAtt); the CORS rules are
	// decoded below, with tagged values blanked.
	var p struct {
		NotificationConfiguration struct {
			LambdaConfigurations []struct {
				Event    string    `yaml:"Event"`
				Function yaml.Node `yaml:"Function"`
			} `yaml:"LambdaConfigurations"`
		} `yaml:"NotificationConfiguration"`
	}
	if err := props.Decode(&p); err != nil {
		return err
	}
	var cors struct {
		CorsConfiguration struct {
			CorsRules []CORSRule `yaml:"CorsRules"`
		} `yaml:"CorsConfiguration"`
	}
	if err := decodeLiteral(props, &cors); err != nil {
		return err
	}
	spec.Bucket.LogicalID, spec.Bucket.CORSRules = id, cors.CorsConfiguration.CorsRules
	// The function a notification invokes: !GetAtt <LogicalId>.Arn.
	for _, lc := range p.NotificationConfiguration.LambdaConfigurations {
		fn, ok := strings.CutSuffix(lc.Function.Value, ".Arn")
		if lc.Function.Tag == "!GetAtt" && ok && strings.HasPrefix(lc.Event, "s3:ObjectCreated:") {
			spec.ObjectCreatedFunction = fn
		}
	}
	return nil
}

func readFunction(id string, props *yaml.Node, spec *Spec) error {
	var p struct {
		Timeout int `yaml:"Timeout"`
		Events  map[string]struct {
			Type       string `yaml:"Type"`
			Properties struct {
				Method                string   `yaml:"Method"`
				Path                  string   `yaml:"Path"`
				Events                any      `yaml:"Events"`
				StartingPosition      string   `yaml:"StartingPosition"`
				BatchSize             int      `yaml:"BatchSize"`
				MaximumRetryAttempts  *int     `yaml:"MaximumRetryAttempts"`
				FunctionResponseTypes []string `yaml:"FunctionResponseTypes"`
				FilterCriteria        struct {
					Filters []struct {
						Pattern string `yaml:"Pattern"`
					} `yaml:"Filters"`
				} `yaml:"FilterCriteria"`
			} `yaml:"Properties"`
		} `yaml:"Events"`
	}
	if err := decodeLiteral(props, &p); err != nil {
		return err
	}
	if p.Timeout > 0 {
		spec.Timeouts[id] = time.Duration(p.Timeout) * time.Second
	}
	for _, ev := range p.Events {
		switch ev.Type {
		case "HttpApi":
			spec.Routes = append(spec.Routes, Route{Method: strings.ToUpper(ev.Properties.Method), Path: ev.Properties.Path, Function: id})
		case "S3":
			if strings.Contains(fmt.Sprint(ev.Properties.Events), "s3:ObjectCreated:") {
				spec.ObjectCreatedFunction = id
			}
		case "DynamoDB":
			if spec.Stream != nil {
				return fmt.Errorf("a second reader of the table's stream (%s has one)", spec.Stream.Function)
			}
			st := &StreamSpec{Function: id, StartingPosition: ev.Properties.StartingPosition, BatchSize: ev.Properties.BatchSize, MaxRetries: -1}
			if st.BatchSize == 0 {
				st.BatchSize = 100 // Lambda's default for DynamoDB streams
			}
			if n := ev.Properties.MaximumRetryAttempts; n != nil {
				st.MaxRetries = *n
			}
			st.ReportBatchItemFailures = slices.Contains(ev.Properties.FunctionResponseTypes, "ReportBatchItemFailures")
			for _, f := range ev.Properties.FilterCriteria.Filters {
				pattern, err := parsePattern(f.Pattern)
				if err != nil {
					return err
				}
				st.Filters = append(st.Filters, pattern)
			}
			spec.Stream = st
		}
	}
	return nil
}
