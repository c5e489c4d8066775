package recordstore

import (
	"errors"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The memory store compares a Require value with the stored one as
// DynamoDB's `=` does, so that a test on it passes only what DynamoDB
// would: by type and value, not by how the value happens to be spelled.
func TestSameValue(t *testing.T) {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	m := func(kv map[string]types.AttributeValue) types.AttributeValue {
		return &types.AttributeValueMemberM{Value: kv}
	}
	l := func(vs ...types.AttributeValue) types.AttributeValue { return &types.AttributeValueMemberL{Value: vs} }
	cases := []struct {
		name string
		a, b types.AttributeValue
		want bool
	}{
		{"equal strings", s("a"), s("a"), true},
		{"other strings", s("a"), s("b"), false},
		{"a number is not its digits", n("42"), s("42"), false},
		{"numbers by value", n("1.0"), n("1"), true},
		{"an exponent", n("1e2"), n("100"), true},
		{"other numbers", n("1"), n("1.5"), false},
		{"bytes", &types.AttributeValueMemberB{Value: []byte("x")}, &types.AttributeValueMemberB{Value: []byte("x")}, true},
		{"booleans", &types.AttributeValueMemberBOOL{Value: true}, &types.AttributeValueMemberBOOL{Value: false}, false},
		{"null", &types.AttributeValueMemberNULL{Value: true}, &types.AttributeValueMemberNULL{Value: true}, true},
		{"a set in another order", &types.AttributeValueMemberSS{Value: []string{"a", "b"}}, &types.AttributeValueMemberSS{Value: []string{"b", "a"}}, true},
		{"number sets by value", &types.AttributeValueMemberNS{Value: []string{"1", "2.0"}}, &types.AttributeValueMemberNS{Value: []string{"2", "1"}}, true},
		{"a smaller set", &types.AttributeValueMemberSS{Value: []string{"a", "b"}}, &types.AttributeValueMemberSS{Value: []string{"a"}}, false},
		{"lists in order", l(n("1"), n("2")), l(n("1"), n("2.0")), true},
		{"lists out of order", l(n("1"), n("2")), l(n("2"), n("1")), false},
		{"maps member by member", m(map[string]types.AttributeValue{"a": n("1")}), m(map[string]types.AttributeValue{"a": n("1.00")}), true},
		{"maps with another member", m(map[string]types.AttributeValue{"a": n("1")}), m(map[string]types.AttributeValue{"b": n("1")}), false},
	}
	for _, tc := range cases {
		if got := sameValue(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: sameValue = %v, want %v", tc.name, got, tc.want)
		}
		if got := sameValue(tc.b, tc.a); got != tc.want {
			t.Errorf("%s, the other way: sameValue = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Finalize's Require of the size it claimed is met on every upload: the
// comparison that says so allocates nothing (math/big's parsing would).
func TestSameValueOfEqualNumbersAllocatesNothing(t *testing.T) {
	a, b := &types.AttributeValueMemberN{Value: "48213"}, &types.AttributeValueMemberN{Value: "48213"}
	if n := testing.AllocsPerRun(100, func() { sameValue(a, b) }); n != 0 {
		t.Errorf("sameValue(N 48213, N 48213): %v allocations, want 0", n)
	}
}

// NewData encodes with one shared encoder instead of MarshalMap's new one
// per call: what it makes of every kind of value must stay MarshalMap's.
func TestNewDataEncodesAsMarshalMap(t *testing.T) {
	type fields struct {
		Key   string   `dynamodbav:"object_key,omitempty"`
		Size  int64    `dynamodbav:"size,omitempty"`
		Parts []int    `dynamodbav:"parts,omitempty"`
		Tags  []string `dynamodbav:"tags,stringset,omitempty"`
	}
	for _, v := range []any{
		fields{Key: "uploads/x", Size: 48213, Parts: []int{1, 2}, Tags: []string{"a"}},
		fields{}, // every field omitted
		&fields{Size: 1},
		map[string]any{"size": int64(42), "nested": map[string]any{"ok": true}, "none": nil},
		map[string]any{},
		42, // not a map: no fields, as MarshalMap says
		"text",
	} {
		want, wantErr := attributevalue.MarshalMap(v)
		got, err := NewData(v)
		if (err != nil) != (wantErr != nil) || !reflect.DeepEqual(got.m, want) {
			t.Errorf("NewData(%#v) = %#v, %v; MarshalMap: %#v, %v", v, got.m, err, want, wantErr)
		}
	}
	if _, err := NewData(map[string]any{"f": failingValue{}}); err == nil {
		t.Error("NewData of a value that fails to encode: no error")
	}
}

// failingValue fails to encode.
type failingValue struct{}

func (failingValue) MarshalDynamoDBAttributeValue() (types.AttributeValue, error) {
	return nil, errors.New("no encoding")
}
