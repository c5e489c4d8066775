package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	sttypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/onceupload/onceupload/internal/tableitem"
)

// pollInterval is how often an idle shard is read; Lambda polls a shard
// about four times a second.
const pollInterval = 250 * time.Millisecond

// streamPoller plays Lambda's event source mapping for the table's stream:
// it reads each shard in order, drops records no filter pattern matches,
// invokes the stream function with the rest in batches, and on a reported
// failure retries the batch from the failed record.
type streamPoller struct {
	st      *Stack
	spec    StreamSpec
	streams *dynamodbstreams.Client
	arn     string

	mu      sync.Mutex
	started map[string]bool // shards being read or read
}

// startStreams enables the table's stream if the template declares one and
// starts polling it. A table made before the template had a stream gets
// one (as a CloudFormation update would); a DynamoDB server without
// streams (dynalite) turns events off with a warning.
func (st *Stack) startStreams(ctx context.Context, created bool) error {
	spec := st.spec.Stream
	if spec == nil || st.spec.Table.StreamViewType == "" {
		return nil
	}
	ddb := dynamodb.NewFromConfig(st.awsConfig(), func(o *dynamodb.Options) { o.BaseEndpoint = &st.DynamoURL })
	out, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &st.Table})
	if err != nil {
		return fmt.Errorf("describe table %s: %w", st.Table, err)
	}
	arn := aws.ToString(out.Table.LatestStreamArn)
	if !created && (out.Table.StreamSpecification == nil || !aws.ToBool(out.Table.StreamSpecification.StreamEnabled)) {
		// A table made before the template had a stream gets one, as a
		// CloudFormation update would.
		up, err := ddb.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: &st.Table, StreamSpecification: &dbtypes.StreamSpecification{
			StreamEnabled: aws.Bool(true), StreamViewType: dbtypes.StreamViewType(st.spec.Table.StreamViewType)}})
		if err == nil {
			arn, out.Table.StreamSpecification = aws.ToString(up.TableDescription.LatestStreamArn), up.TableDescription.StreamSpecification
		}
	}
	if arn == "" || out.Table.StreamSpecification == nil || !aws.ToBool(out.Table.StreamSpecification.StreamEnabled) {
		st.cfg.Logger.Warn("events: the local DynamoDB server gives the table no stream, so no upload events are delivered (dynoxide has streams; dynalite does not)")
		return nil
	}
	if view := out.Table.StreamSpecification.StreamViewType; string(view) != st.spec.Table.StreamViewType {
		return fmt.Errorf("events: the table's stream is %s, the template's %s: delete the data directory (%s) to start afresh", view, st.spec.Table.StreamViewType, st.cfg.DataDir)
	}
	st.EventsEnabled = true
	position := sttypes.ShardIteratorType(spec.StartingPosition)
	if !created {
		// A kept data directory: its old changes were delivered by the
		// last run, so start at the end, as a mapping that already exists
		// would continue rather than start over.
		position = sttypes.ShardIteratorTypeLatest
	}
	p := &streamPoller{st: st, spec: *spec, arn: arn, started: map[string]bool{},
		streams: dynamodbstreams.NewFromConfig(st.awsConfig(), func(o *dynamodbstreams.Options) { o.BaseEndpoint = &st.DynamoURL })}
	return p.startShards(ctx, position)
}

// startShards starts a reader for each shard not read yet, at position: at
// the start, every shard; after a shard closes, its children, which are
// read from their beginning (TRIM_HORIZON), as Lambda reads a child once
// its parent is done. dynoxide keeps one shard; this is for a server that
// rolls shards over.
func (p *streamPoller) startShards(ctx context.Context, position sttypes.ShardIteratorType) error {
	shards, err := p.shards(ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, shard := range shards {
		if p.started[shard] {
			continue
		}
		it, err := p.streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: &p.arn, ShardId: &shard, ShardIteratorType: position})
		if err != nil {
			return fmt.Errorf("events: shard iterator: %w", err)
		}
		p.started[shard] = true
		p.st.pending.Add(1)
		go p.poll(shard, aws.ToString(it.ShardIterator))
	}
	return nil
}

func (p *streamPoller) shards(ctx context.Context) ([]string, error) {
	var ids []string
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: &p.arn}
	for {
		out, err := p.streams.DescribeStream(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("events: describe stream: %w", err)
		}
		// Every shard, closed ones too: a closed shard's reader ends when
		// GetRecords gives no next iterator. (dynoxide, restarted on its
		// data, reports its one shard with an ending sequence number yet
		// goes on writing to it.)
		for _, s := range out.StreamDescription.Shards {
			ids = append(ids, aws.ToString(s.ShardId))
		}
		if out.StreamDescription.LastEvaluatedShardId == nil {
			return ids, nil
		}
		in.ExclusiveStartShardId = out.StreamDescription.LastEvaluatedShardId
	}
}

// poll reads one shard until the stack closes or the shard ends.
func (p *streamPoller) poll(shard, iterator string) {
	defer p.st.pending.Done()
	ctx := p.st.ctx
	log := p.st.cfg.Logger.With("shard", shard)
	last := "" // the sequence number of the last record handled
	for iterator != "" {
		out, err := p.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: &iterator, Limit: aws.Int32(int32(p.spec.BatchSize))})
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			var expired *sttypes.ExpiredIteratorException
			if errors.As(err, &expired) {
				// Iterators last 15 minutes: a long retry can outlive one.
				// Go on after the last record handled.
				in := &dynamodbstreams.GetShardIteratorInput{StreamArn: &p.arn, ShardId: &shard, ShardIteratorType: sttypes.ShardIteratorTypeTrimHorizon}
				if last != "" {
					in.ShardIteratorType, in.SequenceNumber = sttypes.ShardIteratorTypeAfterSequenceNumber, &last
				}
				if it, ierr := p.streams.GetShardIterator(ctx, in); ierr == nil {
					iterator = aws.ToString(it.ShardIterator)
					continue
				}
			}
			log.Warn("events: GetRecords failed; retrying", "error", err)
			if !p.sleep(ctx, time.Second) {
				return
			}
			continue
		}
		iterator = aws.ToString(out.NextShardIterator)
		if batch := p.filter(out.Records); len(batch) > 0 {
			p.deliver(ctx, batch)
		}
		if n := len(out.Records); n > 0 && out.Records[n-1].Dynamodb != nil {
			last = aws.ToString(out.Records[n-1].Dynamodb.SequenceNumber)
		}
		if len(out.Records) == 0 && !p.sleep(ctx, pollInterval) {
			return
		}
	}
	log.Info("events: shard closed; reading its children")
	if err := p.startShards(ctx, sttypes.ShardIteratorTypeTrimHorizon); err != nil && ctx.Err() == nil {
		log.Error("events: cannot read the stream's new shards; events stop", "error", err)
	}
}

func (p *streamPoller) sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

// filter converts records to the events Lambda delivers and keeps those a
// filter pattern matches (all of them when there is no filter).
func (p *streamPoller) filter(records []sttypes.Record) []events.DynamoDBEventRecord {
	var kept []events.DynamoDBEventRecord
	for _, r := range records {
		ev, err := lambdaRecord(r, p.arn)
		if err != nil {
			p.st.cfg.Logger.Error("events: cannot read a stream record", "error", err)
			continue
		}
		if len(p.spec.Filters) > 0 {
			raw, err := json.Marshal(ev)
			var generic map[string]any
			if err == nil {
				err = json.Unmarshal(raw, &generic)
			}
			if err != nil {
				p.st.cfg.Logger.Error("events: cannot encode a stream record", "error", err)
				continue
			}
			matched := false
			for _, f := range p.spec.Filters {
				matched = matched || matchPattern(f, generic)
			}
			if !matched {
				continue
			}
		}
		kept = append(kept, ev)
	}
	return kept
}

// deliver invokes the stream function with batch until it reports no
// failure, retrying from the failed record, MaxRetries times at most
// (Lambda's MaximumRetryAttempts; -1 is unbounded).
func (p *streamPoller) deliver(ctx context.Context, batch []events.DynamoDBEventRecord) {
	fn := p.spec.Function
	for attempt := 0; len(batch) > 0; attempt++ {
		if p.spec.MaxRetries >= 0 && attempt > p.spec.MaxRetries {
			p.st.cfg.Logger.Error("events: batch dropped after its retries (AWS would send it to the on-failure destination; replay it with cmd/replay-events)",
				"function", fn, "records", len(batch), "firstSequence", batch[0].Change.SequenceNumber)
			return
		}
		if attempt > 0 && !p.sleep(ctx, min(time.Duration(attempt)*200*time.Millisecond, 5*time.Second)) {
			p.st.cfg.Logger.Warn("events: the stack stopped while a batch was retried; its events are not delivered (the next start begins at the stream's end)",
				"records", len(batch), "firstSequence", batch[0].Change.SequenceNumber)
			return
		}
		payload, err := json.Marshal(events.DynamoDBEvent{Records: batch})
		if err != nil {
			p.st.cfg.Logger.Error("events: cannot encode a batch", "error", err)
			return
		}
		ictx, cancel := context.WithTimeout(ctx, p.st.timeout(fn))
		out, err := p.st.invokers[fn].Invoke(ictx, payload)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			p.st.cfg.Logger.Warn("events: the stream function failed; retrying the batch", "function", fn, "attempt", attempt+1, "error", err)
			continue
		}
		if !p.spec.ReportBatchItemFailures {
			return // without the response type, Lambda takes any answer as success
		}
		var resp events.DynamoDBEventResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			p.st.cfg.Logger.Warn("events: unreadable answer; retrying the batch", "function", fn, "error", err)
			continue
		}
		batch = fromFailure(batch, resp)
	}
}

// fromFailure is what is left of batch after an answer: the records from
// the lowest reported failure on, or nothing.
func fromFailure(batch []events.DynamoDBEventRecord, resp events.DynamoDBEventResponse) []events.DynamoDBEventRecord {
	for i, r := range batch {
		for _, f := range resp.BatchItemFailures {
			if f.ItemIdentifier == r.Change.SequenceNumber {
				return batch[i:]
			}
		}
	}
	if len(resp.BatchItemFailures) > 0 {
		return batch // a failure naming no record of the batch fails it all, as on Lambda
	}
	return nil
}

// lambdaRecord is a stream record as Lambda hands it to a function.
func lambdaRecord(r sttypes.Record, arn string) (events.DynamoDBEventRecord, error) {
	ev := events.DynamoDBEventRecord{
		AWSRegion: aws.ToString(r.AwsRegion), EventID: aws.ToString(r.EventID), EventName: string(r.EventName),
		EventSource: aws.ToString(r.EventSource), EventVersion: aws.ToString(r.EventVersion), EventSourceArn: arn,
	}
	if d := r.Dynamodb; d != nil {
		var images [3]map[string]events.DynamoDBAttributeValue
		for i, img := range []map[string]sttypes.AttributeValue{d.Keys, d.NewImage, d.OldImage} {
			if img == nil {
				continue
			}
			sdk, err := attributevalue.FromDynamoDBStreamsMap(img)
			if err != nil {
				return ev, fmt.Errorf("stream record %s: %w", aws.ToString(d.SequenceNumber), err)
			}
			images[i] = tableitem.LambdaImage(sdk)
		}
		ev.Change = events.DynamoDBStreamRecord{
			Keys: images[0], NewImage: images[1], OldImage: images[2],
			SequenceNumber: aws.ToString(d.SequenceNumber), SizeBytes: aws.ToInt64(d.SizeBytes), StreamViewType: string(d.StreamViewType),
		}
		if d.ApproximateCreationDateTime != nil {
			ev.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: *d.ApproximateCreationDateTime}
		}
	}
	return ev, nil
}
