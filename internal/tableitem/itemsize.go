package tableitem

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ItemSize is item's size in bytes by DynamoDB's published rules ("Item
// sizes and formats"): each attribute's name plus its value; a string by
// its UTF-8 bytes, a binary by its raw bytes, a number by one byte per two
// significant digits plus one, a boolean or null one byte, a list or map
// three bytes plus one per element plus its elements (a map's keys count as
// names), a set the sum of its elements. Billing rounds this up: see
// WriteUnits and ReadUnits.
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 0
}

// numberSize is a number's size: its significant digits (leading and
// trailing zeroes trimmed, sign, point and exponent not counted), one byte
// per two, plus one.
func numberSize(s string) int {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	digits := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, s)
	digits = strings.Trim(digits, "0")
	return (len(digits)+1)/2 + 1
}

// WriteUnits is what one standard write of an item of size bytes costs:
// one unit per KiB, rounded up, at least one.
func WriteUnits(size int) int { return max(1, (size+1023)/1024) }

// ReadUnits is what one read of an item of size bytes costs: one unit per
// 4 KiB, rounded up, at least one, halved when eventually consistent.
func ReadUnits(size int, consistent bool) float64 {
	u := float64(max(1, (size+4095)/4096))
	if !consistent {
		u /= 2
	}
	return u
}
