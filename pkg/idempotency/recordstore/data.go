package recordstore

import (
	"bytes"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Data is a record's own fields, the caller's (an upload's object key and
// size), as the store keeps them: a DynamoDB map in the item's data
// attribute, encoded and decoded with feature/dynamodb/attributevalue, so a
// Go struct with dynamodbav tags is its natural form. A claim's is made
// with NewData; a record read back is decoded with Decode. The zero Data
// has no fields.
type Data struct {
	m map[string]types.AttributeValue
}

// encoder is attributevalue's default encoder, the one Marshal and
// MarshalMap make afresh (two allocations) on every call. It holds only
// its options and never writes them, so one serves every update.
var encoder = attributevalue.NewEncoder()

// NewData encodes v, a struct with dynamodbav tags or a map[string]any, as
// a record's fields.
func NewData(v any) (Data, error) {
	// As attributevalue.MarshalMap, with the shared encoder.
	av, err := encoder.Encode(v)
	if err != nil {
		return Data{}, fmt.Errorf("encode record data: %w", err)
	}
	m, ok := av.(*types.AttributeValueMemberM)
	if !ok {
		return Data{m: map[string]types.AttributeValue{}}, nil
	}
	return Data{m: m.Value}, nil
}

// Decode decodes the fields into v, as attributevalue.UnmarshalMap does.
func (d Data) Decode(v any) error {
	if err := attributevalue.UnmarshalMap(d.m, v); err != nil {
		return fmt.Errorf("decode record data: %w", err)
	}
	return nil
}

// clone copies d; the zero Data's copy is an empty map, which an update
// can set fields in.
func (d Data) clone() Data {
	if d.m == nil {
		return Data{m: map[string]types.AttributeValue{}}
	}
	return Data{m: maps.Clone(d.m)}
}

// Field is one data field of an update's Require or RequireAbsentOrEqual,
// its value encoded.
type Field struct {
	Name  string
	Value types.AttributeValue
}

// fieldValues encodes fields, each value as attributevalue.Marshal does,
// for an update's Require and RequireAbsentOrEqual, in name order: the
// order dynamostore.Store writes their conditions in. Both stores only walk
// them, so a slice, not a second map.
func fieldValues(fields map[string]any) ([]Field, error) {
	if len(fields) == 0 {
		return nil, nil
	}
	fs := make([]Field, 0, len(fields))
	for k, v := range fields {
		av, err := encoder.Encode(v)
		if err != nil {
			return nil, fmt.Errorf("encode data field %q: %w", k, err)
		}
		fs = append(fs, Field{k, av})
	}
	slices.SortFunc(fs, func(a, b Field) int { return strings.Compare(a.Name, b.Name) })
	return fs, nil
}

// sameValue reports whether a and b are equal as DynamoDB's `=` compares
// them: of the same type, numbers by their value ("1.0" is "1"), sets
// whatever their order, lists in order, maps member by member.
func sameValue(a, b types.AttributeValue) bool {
	switch a := a.(type) {
	case *types.AttributeValueMemberS:
		b, ok := b.(*types.AttributeValueMemberS)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberN:
		b, ok := b.(*types.AttributeValueMemberN)
		return ok && sameNumber(a.Value, b.Value)
	case *types.AttributeValueMemberB:
		b, ok := b.(*types.AttributeValueMemberB)
		return ok && bytes.Equal(a.Value, b.Value)
	case *types.AttributeValueMemberBOOL:
		b, ok := b.(*types.AttributeValueMemberBOOL)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberNULL:
		_, ok := b.(*types.AttributeValueMemberNULL)
		return ok
	case *types.AttributeValueMemberSS:
		b, ok := b.(*types.AttributeValueMemberSS)
		return ok && sameSet(a.Value, b.Value, strings.Compare)
	case *types.AttributeValueMemberBS:
		b, ok := b.(*types.AttributeValueMemberBS)
		return ok && sameSet(a.Value, b.Value, bytes.Compare)
	case *types.AttributeValueMemberNS:
		b, ok := b.(*types.AttributeValueMemberNS)
		return ok && sameSet(a.Value, b.Value, compareNumbers)
	case *types.AttributeValueMemberL:
		b, ok := b.(*types.AttributeValueMemberL)
		return ok && slices.EqualFunc(a.Value, b.Value, sameValue)
	case *types.AttributeValueMemberM:
		b, ok := b.(*types.AttributeValueMemberM)
		return ok && maps.EqualFunc(a.Value, b.Value, sameValue)
	}
	return false
}

func sameNumber(a, b string) bool { return compareNumbers(a, b) == 0 }

// compareNumbers orders DynamoDB numbers by value; text that is no number
// orders by the text.
func compareNumbers(a, b string) int {
	if a == b {
		// The same text is the same number (and the same non-number):
		// the usual case, a Require met, answered without parsing.
		return 0
	}
	x, okx := new(big.Rat).SetString(a)
	y, oky := new(big.Rat).SetString(b)
	if !okx || !oky {
		return strings.Compare(a, b)
	}
	return x.Cmp(y)
}

func sameSet[T any](a, b []T, cmp func(T, T) int) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.SortedFunc(slices.Values(a), cmp), slices.SortedFunc(slices.Values(b), cmp)
	return slices.EqualFunc(a, b, func(x, y T) bool { return cmp(x, y) == 0 })
}
