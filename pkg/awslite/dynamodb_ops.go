package awslite

import "context"

// The item operations, with the members this project uses. Field names
// are the protocol's; empty members are left out of the request.

// PutItemInput is PutItem's request.
type PutItemInput struct {
	TableName                           string                    `json:"TableName"`
	Item                                map[string]AttributeValue `json:"Item"`
	ConditionExpression                 string                    `json:"ConditionExpression,omitempty"`
	ExpressionAttributeNames            map[string]string         `json:"ExpressionAttributeNames,omitempty"`
	ExpressionAttributeValues           map[string]AttributeValue `json:"ExpressionAttributeValues,omitempty"`
	ReturnValues                        string                    `json:"ReturnValues,omitempty"`
	ReturnValuesOnConditionCheckFailure string                    `json:"ReturnValuesOnConditionCheckFailure,omitempty"`
}

// PutItemOutput is PutItem's answer.
type PutItemOutput struct {
	Attributes map[string]AttributeValue `json:"Attributes"`
}

// GetItemInput is GetItem's request.
type GetItemInput struct {
	TableName                string                    `json:"TableName"`
	Key                      map[string]AttributeValue `json:"Key"`
	ConsistentRead           bool                      `json:"ConsistentRead,omitempty"`
	ProjectionExpression     string                    `json:"ProjectionExpression,omitempty"`
	ExpressionAttributeNames map[string]string         `json:"ExpressionAttributeNames,omitempty"`
}

// GetItemOutput is GetItem's answer; Item is nil when there is none.
type GetItemOutput struct {
	Item map[string]AttributeValue `json:"Item"`
}

// UpdateItemInput is UpdateItem's request.
type UpdateItemInput struct {
	TableName                           string                    `json:"TableName"`
	Key                                 map[string]AttributeValue `json:"Key"`
	UpdateExpression                    string                    `json:"UpdateExpression,omitempty"`
	ConditionExpression                 string                    `json:"ConditionExpression,omitempty"`
	ExpressionAttributeNames            map[string]string         `json:"ExpressionAttributeNames,omitempty"`
	ExpressionAttributeValues           map[string]AttributeValue `json:"ExpressionAttributeValues,omitempty"`
	ReturnValues                        string                    `json:"ReturnValues,omitempty"`
	ReturnValuesOnConditionCheckFailure string                    `json:"ReturnValuesOnConditionCheckFailure,omitempty"`
}

// UpdateItemOutput is UpdateItem's answer.
type UpdateItemOutput struct {
	Attributes map[string]AttributeValue `json:"Attributes"`
}

// DeleteItemInput is DeleteItem's request.
type DeleteItemInput struct {
	TableName                           string                    `json:"TableName"`
	Key                                 map[string]AttributeValue `json:"Key"`
	ConditionExpression                 string                    `json:"ConditionExpression,omitempty"`
	ExpressionAttributeNames            map[string]string         `json:"ExpressionAttributeNames,omitempty"`
	ExpressionAttributeValues           map[string]AttributeValue `json:"ExpressionAttributeValues,omitempty"`
	ReturnValues                        string                    `json:"ReturnValues,omitempty"`
	ReturnValuesOnConditionCheckFailure string                    `json:"ReturnValuesOnConditionCheckFailure,omitempty"`
}

// DeleteItemOutput is DeleteItem's answer.
type DeleteItemOutput struct {
	Attributes map[string]AttributeValue `json:"Attributes"`
}

// PutItem writes an item.
func (d *DynamoDB) PutItem(ctx context.Context, in *PutItemInput) (*PutItemOutput, error) {
	return send[PutItemOutput](ctx, d, "PutItem", in)
}

// GetItem reads an item.
func (d *DynamoDB) GetItem(ctx context.Context, in *GetItemInput) (*GetItemOutput, error) {
	return send[GetItemOutput](ctx, d, "GetItem", in)
}

// UpdateItem changes an item.
func (d *DynamoDB) UpdateItem(ctx context.Context, in *UpdateItemInput) (*UpdateItemOutput, error) {
	return send[UpdateItemOutput](ctx, d, "UpdateItem", in)
}

// DeleteItem deletes an item.
func (d *DynamoDB) DeleteItem(ctx context.Context, in *DeleteItemInput) (*DeleteItemOutput, error) {
	return send[DeleteItemOutput](ctx, d, "DeleteItem", in)
}

// send sends op and decodes its answer into a new Out.
func send[Out any](ctx context.Context, d *DynamoDB, op string, in any) (*Out, error) {
	var out Out
	if err := d.invoke(ctx, op, in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
