package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/onceupload/onceupload/internal/tableitem"
)

// This file is the capacity meter: an SDK middleware on the product's
// DynamoDB client that asks the server for ConsumedCapacity on each call
// and computes what AWS bills for the same call from AWS's published rules,
// from the sizes of the items the call read and wrote. The product's
// requests are unchanged but for ReturnConsumedCapacity; the items' sizes
// come from reads the meter makes on a client of its own, which nothing
// counts.
//
// The rules, from the DynamoDB Developer Guide:
//   - "DynamoDB read and write operations" (read-write-operations.html):
//     a write costs one unit per KiB of the item, rounded up; PutItem that
//     replaces an item and UpdateItem cost by the larger of the item before
//     and after; DeleteItem by the item deleted; a conditional write whose
//     condition fails still costs, by the larger of the stored item and the
//     one sent (an absent item counts as one unit). GetItem costs one unit
//     per 4 KiB of the item, half when eventually consistent; a Query the
//     sum of the sizes of all the items it read (before any filter), rounded
//     up to 4 KiB once.
//   - "Global secondary indexes", its section on writes (GSI.html#GSI.Writes):
//     a write that puts an item into an index, or removes it, costs one
//     index write; one that changes an indexed key costs two (a delete and
//     a put); one that changes only projected attributes costs one; an item
//     in the index neither before nor after costs nothing there. An index
//     write costs by the size of the index entry (its projected
//     attributes, the table's and the index's keys included). A GSI is read
//     eventually consistently, always.
//
// ReturnValues and ReturnValuesOnConditionCheckFailure cost nothing extra.

// Call is one DynamoDB call the meter saw: its operation, the sizes of the
// items involved, the units AWS's rules give, and the units the server
// reported.
type Call struct {
	Op string `json:"op"`
	// Failed: the call returned an error (a failed condition, for a write).
	Failed bool `json:"failed,omitempty"`
	// Before and After are the item's sizes in bytes before and after the
	// call, as stored (0: absent); Sent is a PutItem's item.
	Before int `json:"before_bytes,omitempty"`
	After  int `json:"after_bytes,omitempty"`
	Sent   int `json:"sent_bytes,omitempty"`
	// Read is what a read read: the item, or a Query's items.
	Read int `json:"read_bytes,omitempty"`
	// WriteUnits and ReadUnits are AWS's rules' units, table and indexes;
	// IndexWriteUnits is the indexes' part of WriteUnits.
	WriteUnits      int     `json:"write_units,omitempty"`
	IndexWriteUnits int     `json:"index_write_units,omitempty"`
	ReadUnits       float64 `json:"read_units,omitempty"`
	// Reported is the server's ConsumedCapacity.CapacityUnits, nil when it
	// sent none (DynamoDB sends none with an error, a failed condition
	// included).
	Reported *float64 `json:"reported_units,omitempty"`
	// ReportedIndex is the indexes' part of Reported, when the server
	// itemised it.
	ReportedIndex float64 `json:"reported_index_units,omitempty"`
}

// Units is the call's units by the rules: write units for a write, read
// units for a read.
func (c Call) Units() float64 { return float64(c.WriteUnits) + c.ReadUnits }

// Meter measures the capacity of the DynamoDB calls of the clients whose
// stacks it is added to (Middleware), while it is armed, and counts their
// S3 requests. The zero value is disarmed: calls go through untouched.
type Meter struct {
	mu sync.Mutex
	// peek reads items for the sizes the rules need; it is a client of its
	// own, so its reads are neither metered nor counted as the product's.
	peek   *dynamodb.Client
	armed  bool
	calls  []Call
	s3     map[string]int
	tables map[string]*tableShape
}

// tableShape is what the rules need of a table: its key and its global
// secondary indexes.
type tableShape struct {
	key     []string
	indexes []indexShape
}

type indexShape struct {
	name string
	key  []string
	// all: the index projects every attribute; else nonKey lists the
	// projected ones besides the keys (none for KEYS_ONLY).
	all    bool
	nonKey []string
}

// Arm starts metering, reading items through peek (a client of the same
// server without the meter on it), and forgets what was taken so far.
func (m *Meter) Arm(peek *dynamodb.Client) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.peek, m.armed, m.calls, m.s3 = peek, true, nil, map[string]int{}
	if m.tables == nil {
		m.tables = map[string]*tableShape{}
	}
}

// Disarm stops metering.
func (m *Meter) Disarm() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.armed = false
}

// Take returns the DynamoDB calls metered and the S3 requests counted (by
// operation) since Arm or the last Take, and forgets them.
func (m *Meter) Take() ([]Call, map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, s := m.calls, m.s3
	m.calls, m.s3 = nil, map[string]int{}
	return c, s
}

// pending is how many calls and requests were taken since the last Take.
func (m *Meter) pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.calls)
	for _, v := range m.s3 {
		n += v
	}
	return n
}

func (m *Meter) isArmed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.armed
}

func (m *Meter) add(c Call) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, c)
}

// Middleware adds the meter's steps to a client's stack; use it in
// Options.APIOptions. DynamoDB's calls are metered in the initialize step,
// once per operation (a retried attempt is not seen again; local servers
// that answer need none). S3's requests are counted after the retry step,
// once per attempt, as callcount counts them: a presigned URL, which runs
// the stack but is never sent, does not count.
func (m *Meter) Middleware(stack *middleware.Stack) error {
	id := fmt.Sprintf("capacity-meter-%p", m)
	err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc(id,
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if !m.isArmed() || awsmiddleware.GetServiceID(ctx) != "DynamoDB" {
				return next.HandleInitialize(ctx, in)
			}
			return m.meter(ctx, in, next)
		}), middleware.After)
	if err != nil {
		return err
	}
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc(id,
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			if awsmiddleware.GetServiceID(ctx) == "S3" {
				m.mu.Lock()
				if m.armed {
					m.s3[awsmiddleware.GetOperationName(ctx)]++
				}
				m.mu.Unlock()
			}
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

// meter sends the call with ReturnConsumedCapacity set, on a copy of the
// caller's input, and records it.
func (m *Meter) meter(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	const indexes = types.ReturnConsumedCapacityIndexes
	var (
		table string
		key   map[string]types.AttributeValue
		c     = Call{Op: awsmiddleware.GetOperationName(ctx)}
		query *dynamodb.QueryInput
	)
	switch p := in.Parameters.(type) {
	case *dynamodb.PutItemInput:
		cp := *p
		cp.ReturnConsumedCapacity, in.Parameters = indexes, &cp
		table = aws.ToString(p.TableName)
		shape, err := m.shape(ctx, table)
		if err != nil {
			return middleware.InitializeOutput{}, middleware.Metadata{}, err
		}
		key = pick(p.Item, shape.key)
		c.Sent = tableitem.ItemSize(p.Item)
	case *dynamodb.UpdateItemInput:
		cp := *p
		cp.ReturnConsumedCapacity, in.Parameters = indexes, &cp
		table, key = aws.ToString(p.TableName), p.Key
	case *dynamodb.DeleteItemInput:
		cp := *p
		cp.ReturnConsumedCapacity, in.Parameters = indexes, &cp
		table, key = aws.ToString(p.TableName), p.Key
	case *dynamodb.GetItemInput:
		cp := *p
		cp.ReturnConsumedCapacity, in.Parameters = indexes, &cp
	case *dynamodb.QueryInput:
		cp := *p
		cp.ReturnConsumedCapacity, in.Parameters = indexes, &cp
		query = p
	default:
		return next.HandleInitialize(ctx, in)
	}

	var before map[string]types.AttributeValue
	if key != nil {
		var err error
		if before, err = m.item(ctx, table, key); err != nil {
			return middleware.InitializeOutput{}, middleware.Metadata{}, err
		}
		c.Before = size(before)
	}
	if query != nil {
		// The items the query reads, before its filter: the same key
		// condition and page, every projected attribute.
		read, err := m.queryRead(ctx, query)
		if err != nil {
			return middleware.InitializeOutput{}, middleware.Metadata{}, err
		}
		c.Read = read
	}

	out, md, err := next.HandleInitialize(ctx, in)
	c.Failed = err != nil
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return out, md, err // not a billed outcome the rules describe: not recorded
	}

	var after map[string]types.AttributeValue
	if key != nil {
		var perr error
		if after, perr = m.item(ctx, table, key); perr != nil {
			return out, md, perr
		}
		c.After = size(after)
	}
	var cc *types.ConsumedCapacity
	switch o := out.Result.(type) {
	case *dynamodb.PutItemOutput:
		cc = o.ConsumedCapacity
	case *dynamodb.UpdateItemOutput:
		cc = o.ConsumedCapacity
	case *dynamodb.DeleteItemOutput:
		cc = o.ConsumedCapacity
	case *dynamodb.GetItemOutput:
		cc = o.ConsumedCapacity
		c.Read = size(o.Item)
		c.ReadUnits = tableitem.ReadUnits(c.Read, aws.ToBool(in.Parameters.(*dynamodb.GetItemInput).ConsistentRead))
	case *dynamodb.QueryOutput:
		cc = o.ConsumedCapacity
	}
	if query != nil {
		// A global secondary index is read eventually consistently.
		c.ReadUnits = tableitem.ReadUnits(c.Read, aws.ToBool(query.ConsistentRead) && query.IndexName == nil)
	}
	if cc != nil && cc.CapacityUnits != nil {
		u := *cc.CapacityUnits
		c.Reported = &u
		for _, ix := range cc.GlobalSecondaryIndexes {
			c.ReportedIndex += aws.ToFloat64(ix.CapacityUnits)
		}
	}
	if key != nil {
		shape, serr := m.shape(ctx, table)
		if serr != nil {
			return out, md, serr
		}
		c.WriteUnits = writeUnits(c.Op, c.Before, c.After, c.Sent)
		if !c.Failed {
			c.IndexWriteUnits = indexWriteUnits(shape, before, after)
			c.WriteUnits += c.IndexWriteUnits
		}
	}
	m.add(c)
	return out, md, err
}

// writeUnits is what a write of the table costs by the rules, without its
// indexes: before and after are the item's stored sizes around the call
// (equal when it failed), sent a PutItem's item.
func writeUnits(op string, before, after, sent int) int {
	switch op {
	case "PutItem":
		// Replacing (or refused by a condition): the larger of the stored
		// item and the one sent.
		return tableitem.WriteUnits(max(before, sent))
	case "DeleteItem":
		return tableitem.WriteUnits(before)
	default: // UpdateItem
		return tableitem.WriteUnits(max(before, after))
	}
}

// indexWriteUnits is what a write that changed before into after costs on
// the table's indexes (GSI.html#GSI.Writes).
func indexWriteUnits(shape *tableShape, before, after map[string]types.AttributeValue) int {
	n := 0
	for _, ix := range shape.indexes {
		inBefore, inAfter := hasAll(before, ix.key), hasAll(after, ix.key)
		pb, pa := ix.entry(shape.key, before), ix.entry(shape.key, after)
		switch {
		case !inBefore && !inAfter:
		case !inBefore:
			n += tableitem.WriteUnits(size(pa))
		case !inAfter:
			n += tableitem.WriteUnits(size(pb))
		case !reflect.DeepEqual(pick(before, ix.key), pick(after, ix.key)):
			n += tableitem.WriteUnits(size(pb)) + tableitem.WriteUnits(size(pa))
		case !reflect.DeepEqual(pb, pa):
			n += tableitem.WriteUnits(size(pa))
		}
	}
	return n
}

// entry is item's entry in the index: the table's key, the index's key and
// the projected attributes.
func (ix indexShape) entry(tableKey []string, item map[string]types.AttributeValue) map[string]types.AttributeValue {
	if ix.all {
		return item
	}
	return pick(item, slices.Concat(tableKey, ix.key, ix.nonKey))
}

func hasAll(item map[string]types.AttributeValue, names []string) bool {
	for _, n := range names {
		if _, ok := item[n]; !ok {
			return false
		}
	}
	return len(item) > 0
}

func pick(item map[string]types.AttributeValue, names []string) map[string]types.AttributeValue {
	out := map[string]types.AttributeValue{}
	for _, n := range names {
		if v, ok := item[n]; ok {
			out[n] = v
		}
	}
	return out
}

func size(item map[string]types.AttributeValue) int {
	if len(item) == 0 {
		return 0
	}
	return tableitem.ItemSize(item)
}

// item reads the stored item of key, consistently.
func (m *Meter) item(ctx context.Context, table string, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	out, err := m.peeker().GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("capacity meter: read %v: %w", key, err)
	}
	return out.Item, nil
}

// queryRead is the bytes q reads: its page of items with the same key
// condition, unfiltered, every attribute the table or index holds.
func (m *Meter) queryRead(ctx context.Context, q *dynamodb.QueryInput) (int, error) {
	names := maps.Clone(q.ExpressionAttributeNames)
	values := maps.Clone(q.ExpressionAttributeValues)
	// The filter's own names and values must go with it: DynamoDB refuses
	// an expression attribute that no expression uses.
	keep := func(expr string) {
		for k := range names {
			if !containsToken(expr, k) {
				delete(names, k)
			}
		}
		for k := range values {
			if !containsToken(expr, k) {
				delete(values, k)
			}
		}
	}
	keep(aws.ToString(q.KeyConditionExpression))
	if len(names) == 0 {
		names = nil
	}
	out, err := m.peeker().Query(ctx, &dynamodb.QueryInput{
		TableName: q.TableName, IndexName: q.IndexName, ConsistentRead: q.ConsistentRead,
		KeyConditionExpression: q.KeyConditionExpression, ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		ExclusiveStartKey: q.ExclusiveStartKey, Limit: q.Limit,
	})
	if err != nil {
		return 0, fmt.Errorf("capacity meter: query: %w", err)
	}
	n := 0
	for _, it := range out.Items {
		n += size(it)
	}
	return n, nil
}

// containsToken says whether expr names the placeholder tok (#n or :v)
// as a whole token, not as the prefix of a longer one (#n1 in #n10).
func containsToken(expr, tok string) bool {
	for i := 0; ; {
		j := strings.Index(expr[i:], tok)
		if j < 0 {
			return false
		}
		end := i + j + len(tok)
		if end == len(expr) || !isNameByte(expr[end]) {
			return true
		}
		i = end
	}
}

func isNameByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

func (m *Meter) peeker() *dynamodb.Client {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peek
}

// shape describes table once.
func (m *Meter) shape(ctx context.Context, table string) (*tableShape, error) {
	m.mu.Lock()
	s, ok := m.tables[table]
	m.mu.Unlock()
	if ok {
		return s, nil
	}
	out, err := m.peeker().DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return nil, fmt.Errorf("capacity meter: describe %s: %w", table, err)
	}
	s = &tableShape{key: keyNames(out.Table.KeySchema)}
	for _, ix := range out.Table.GlobalSecondaryIndexes {
		is := indexShape{name: aws.ToString(ix.IndexName), key: keyNames(ix.KeySchema)}
		if p := ix.Projection; p != nil {
			is.all = p.ProjectionType == types.ProjectionTypeAll
			is.nonKey = p.NonKeyAttributes
		}
		s.indexes = append(s.indexes, is)
	}
	m.mu.Lock()
	m.tables[table] = s
	m.mu.Unlock()
	return s, nil
}

func keyNames(ks []types.KeySchemaElement) []string {
	var out []string
	for _, k := range ks {
		out = append(out, aws.ToString(k.AttributeName))
	}
	return out
}
