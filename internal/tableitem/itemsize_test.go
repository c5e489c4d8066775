package tableitem

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestItemSize(t *testing.T) {
	cases := []struct {
		name string
		item map[string]types.AttributeValue
		want int
	}{
		{"string: name and UTF-8 bytes", map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "héllo"}}, 2 + 6},
		{"binary: raw bytes", map[string]types.AttributeValue{"h": &types.AttributeValueMemberB{Value: make([]byte, 32)}}, 1 + 32},
		{"number: two digits a byte, plus one", map[string]types.AttributeValue{"n": &types.AttributeValueMemberN{Value: "1893553445000"}}, 1 + 6},
		{"number: zeroes, sign and point trimmed", map[string]types.AttributeValue{"n": &types.AttributeValueMemberN{Value: "-000.12300"}}, 1 + 3},
		{"bool and null", map[string]types.AttributeValue{"b": &types.AttributeValueMemberBOOL{Value: true}, "z": &types.AttributeValueMemberNULL{Value: true}}, 2 + 2},
		{"empty map", map[string]types.AttributeValue{"data": &types.AttributeValueMemberM{}}, 4 + 3},
		{"map: 3 + per element 1 + key + value", map[string]types.AttributeValue{"data": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"size": &types.AttributeValueMemberN{Value: "23"}, "f": &types.AttributeValueMemberS{Value: "abc"},
		}}}, 4 + 3 + (1 + 4 + 2) + (1 + 1 + 3)},
		{"list", map[string]types.AttributeValue{"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{
			&types.AttributeValueMemberS{Value: "ab"}, &types.AttributeValueMemberBOOL{},
		}}}, 1 + 3 + (1 + 2) + (1 + 1)},
		{"string set", map[string]types.AttributeValue{"ss": &types.AttributeValueMemberSS{Value: []string{"a", "bcd"}}}, 2 + 4},
	}
	for _, c := range cases {
		if got := ItemSize(c.item); got != c.want {
			t.Errorf("%s: ItemSize = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestUnits(t *testing.T) {
	for _, c := range []struct{ size, wcu int }{{0, 1}, {1, 1}, {1024, 1}, {1025, 2}, {2048, 2}, {2049, 3}} {
		if got := WriteUnits(c.size); got != c.wcu {
			t.Errorf("WriteUnits(%d) = %d, want %d", c.size, got, c.wcu)
		}
	}
	for _, c := range []struct {
		size       int
		consistent bool
		rcu        float64
	}{{100, true, 1}, {100, false, 0.5}, {4096, true, 1}, {4097, true, 2}, {4097, false, 1}} {
		if got := ReadUnits(c.size, c.consistent); got != c.rcu {
			t.Errorf("ReadUnits(%d, %v) = %v, want %v", c.size, c.consistent, got, c.rcu)
		}
	}
	if got := ItemSize(map[string]types.AttributeValue{"u": &types.AttributeValueMemberS{Value: strings.Repeat("x", 2047)}}); WriteUnits(got) != 2 {
		t.Errorf("a 2,048-byte item costs %d units, want 2", WriteUnits(got))
	}
}
