package bench

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The units of one write by AWS's rules, from the sizes around it.
func TestWriteUnits(t *testing.T) {
	for _, tc := range []struct {
		name               string
		op                 string
		before, after, put int
		want               int
	}{
		{"a fresh PutItem costs by the item sent", "PutItem", 0, 1541, 1541, 2},
		{"a PutItem under a KiB costs one unit", "PutItem", 0, 852, 852, 1},
		{"a PutItem of exactly a KiB costs one unit", "PutItem", 0, 1024, 1024, 1},
		{"a replay costs by the stored item when it is the larger", "PutItem", 2811, 2811, 1541, 3},
		{"a replay costs by the item sent when it is the larger", "PutItem", 900, 900, 1100, 2},
		{"an UpdateItem costs by the item after when it grew", "UpdateItem", 1000, 1100, 0, 2},
		{"an UpdateItem costs by the item before when it shrank", "UpdateItem", 2100, 900, 0, 3},
		{"a failed UpdateItem costs by the stored item", "UpdateItem", 1617, 1617, 0, 2},
		{"an UpdateItem of no item costs one unit", "UpdateItem", 0, 0, 0, 1},
		{"a DeleteItem costs by the item deleted", "DeleteItem", 2100, 0, 0, 3},
		{"a DeleteItem of no item costs one unit", "DeleteItem", 0, 0, 0, 1},
	} {
		if got := writeUnits(tc.op, tc.before, tc.after, tc.put); got != tc.want {
			t.Errorf("%s: %s of %d → %d bytes (sent %d) costs %d units, want %d", tc.name, tc.op, tc.before, tc.after, tc.put, got, tc.want)
		}
	}
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

// The index writes of one table write (GSI.html#GSI.Writes), on the
// project's keys-only group index.
func TestIndexWriteUnits(t *testing.T) {
	shape := &tableShape{key: []string{"pk"}, indexes: []indexShape{{name: "by_group", key: []string{"group", "expires_at"}}}}
	big := strings.Repeat("x", 2000) // not projected: never counts on a keys-only index
	item := func(attrs ...any) map[string]types.AttributeValue {
		m := map[string]types.AttributeValue{"pk": s("u#1"), "body": s(big)}
		for i := 0; i < len(attrs); i += 2 {
			m[attrs[i].(string)] = attrs[i+1].(types.AttributeValue)
		}
		return m
	}
	for _, tc := range []struct {
		name          string
		before, after map[string]types.AttributeValue
		want          int
	}{
		{"an item in no group is not in the index", nil, item("expires_at", n("100")), 0},
		{"a claim in a group puts it into the index", nil, item("group", s("t"), "expires_at", n("100")), 1},
		{"an update of unprojected attributes costs nothing there", item("group", s("t"), "expires_at", n("100")),
			item("group", s("t"), "expires_at", n("100"), "state", s("pending")), 0},
		{"finishing removes the group: one delete", item("group", s("t"), "expires_at", n("100")), item("expires_at", n("100")), 1},
		{"a renewal changes the index's sort key: a delete and a put", item("group", s("t"), "expires_at", n("100")),
			item("group", s("t"), "expires_at", n("200")), 2},
		{"deleting the item removes it from the index", item("group", s("t"), "expires_at", n("100")), nil, 1},
		{"a group without the sort key is not in the index", nil, item("group", s("t")), 0},
	} {
		if got := indexWriteUnits(shape, tc.before, tc.after); got != tc.want {
			t.Errorf("%s: %d index write units, want %d", tc.name, got, tc.want)
		}
	}
}

// An index that projects every attribute is written by an update of any.
func TestIndexWriteUnitsProjectAll(t *testing.T) {
	shape := &tableShape{key: []string{"pk"}, indexes: []indexShape{{name: "all", key: []string{"group"}, all: true}}}
	before := map[string]types.AttributeValue{"pk": s("u#1"), "group": s("t"), "body": s(strings.Repeat("x", 1500))}
	after := map[string]types.AttributeValue{"pk": s("u#1"), "group": s("t"), "body": s(strings.Repeat("y", 1500))}
	if got := indexWriteUnits(shape, before, after); got != 2 {
		t.Errorf("an update of a projected 1.5 KiB item costs %d index write units, want 2", got)
	}
}

func ptr(f float64) *float64 { return &f }

// Summarize adds the rules' units and the server's, and Differences names
// each call where they part.
func TestSummarizeAndDifferences(t *testing.T) {
	calls := []Call{
		{Op: "PutItem", Sent: 1541, After: 1541, WriteUnits: 2, Reported: ptr(2)},
		{Op: "PutItem", Failed: true, Before: 1541, After: 1541, Sent: 1541, WriteUnits: 2},
		{Op: "GetItem", Read: 1541, ReadUnits: 1, Reported: ptr(1)},
		{Op: "Query", Read: 97, ReadUnits: 0.5, Reported: ptr(0.5)},
		{Op: "UpdateItem", Before: 850, After: 943, WriteUnits: 2, IndexWriteUnits: 1, Reported: ptr(1)},
	}
	c := Summarize(calls)
	if c.WriteUnits != 6 || c.IndexWriteUnits != 1 || c.ReadUnits != 1.5 {
		t.Errorf("rules: %d write units (%d on indexes), %v read units; want 6 (1), 1.5", c.WriteUnits, c.IndexWriteUnits, c.ReadUnits)
	}
	if c.ReportedWriteUnits != 3 || c.ReportedReadUnits != 1.5 || c.Unreported != 1 {
		t.Errorf("reported: %v write, %v read, %d unreported; want 3, 1.5, 1", c.ReportedWriteUnits, c.ReportedReadUnits, c.Unreported)
	}
	if got := c.Calls; got["PutItem"] != 2 || got["GetItem"] != 1 || got["Query"] != 1 || got["UpdateItem"] != 1 {
		t.Errorf("calls %v", got)
	}
	want := []string{
		"PutItem (failed): rules 2, server none",
		"UpdateItem: rules 2, server 1 (indexes: rules 1, server 0)",
	}
	if got := c.Differences(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("differences:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The meter's query keeps only the placeholders its key condition names,
// whole: #n1 is not #n10.
func TestContainsToken(t *testing.T) {
	for _, tc := range []struct {
		expr, tok string
		want      bool
	}{
		{"#n0 = :v0 AND #n1 >= :v1", "#n1", true},
		{"#n0 = :v0 AND #n10 >= :v1", "#n1", false},
		{"#n0 = :v0 AND #n10 >= :v1", ":v1", true},
		{"#n0 = :v0", ":v2", false},
		{"(#n2)", "#n2", true},
	} {
		if got := containsToken(tc.expr, tc.tok); got != tc.want {
			t.Errorf("containsToken(%q, %q) = %v, want %v", tc.expr, tc.tok, got, tc.want)
		}
	}
}
