package queue

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"go.uber.org/zap"

	"github.com/reconciled/reconciled/internal/group"
)

// First verdicts of concurrent callers are offered to the verdict stream
// together, as one JetStream atomic batch. A stream that syncs every write
// (the embedded server's SyncAlways) then makes one fsync for the batch
// instead of one a verdict: in a burst the verdict stream's fsyncs, queued
// on one file, otherwise pace the service. Each message of the batch keeps
// its own conditions (its message id, the stream's name, no earlier
// message on its subject), which the server checks for every message
// before it stores any: the batch is stored whole or not at all. A batch
// that is refused or whose answer is lost for any reason is not retried
// as a batch: each of its verdicts goes the single way
// (PublishVerdictWith), whose conditions and history checks make a second
// offer of a stored verdict harmless.

// maxVerdictBatch bounds a batch below the server's default limit (1,000
// messages) and keeps one batch's commit short.
const maxVerdictBatch = 256

// Headers of an atomic batch (NATS ADR-50); nats.go does not name them.
const (
	batchIDHeader     = "Nats-Batch-Id"
	batchSeqHeader    = "Nats-Batch-Sequence"
	batchCommitHeader = "Nats-Batch-Commit"
)

// errCodeAtomicDisabled: the stream does not allow atomic batches (e.g. an
// instance of an older release updated its configuration).
const errCodeAtomicDisabled jetstream.ErrorCode = 10174

type firstVerdict struct {
	ctx context.Context
	msg *nats.Msg // the verdict's message, with its conditions' headers
	// Set by the group's run when tried is: the answer to the batch that
	// held it, or to its single publish.
	tried bool
	ack   *jetstream.PubAck
	err   error
}

type verdictBatches struct {
	// on: the verdict stream allows atomic batches, as its configuration
	// read back from the server says (a server that does not know them
	// leaves the field out).
	on atomic.Bool
	q  group.Queue[*firstVerdict]
	// batches counts the batches the stream stored, for tests.
	batches atomic.Uint64
}

// publishFirst publishes msg, a first verdict carrying its conditions'
// headers, and returns the stream's answer: in one batch with the first
// verdicts offered meanwhile, or alone. A lone verdict is published while
// it holds the queue, so that the verdicts offered during its round trip
// form the next batch.
func (c *Conn) publishFirst(ctx context.Context, msg *nats.Msg) (*jetstream.PubAck, error) {
	if c.batches.on.Load() {
		f := &firstVerdict{ctx: ctx, msg: msg}
		c.batches.q.Do(f, c.publishGroup)
		if f.tried {
			return f.ack, f.err
		}
	}
	return c.js.PublishMsg(ctx, msg)
}

// publishGroup publishes group as one atomic batch, or alone when it holds
// one verdict. Two verdicts of one subject cannot share a batch (the
// server refuses the second's condition), so a repeated subject and a
// caller that has given up are left out, untried, as is every verdict of
// a batch that was not stored.
func (c *Conn) publishGroup(group []*firstVerdict) {
	seen := make(map[string]bool, len(group))
	batch := group[:0:0]
	for _, f := range group {
		if f.ctx.Err() != nil || seen[f.msg.Subject] {
			continue
		}
		seen[f.msg.Subject] = true
		batch = append(batch, f)
	}
	switch len(batch) {
	case 0:
		return
	case 1:
		f := batch[0]
		f.ack, f.err = c.js.PublishMsg(f.ctx, f.msg)
		f.tried = true
		return
	}
	if !c.publishBatch(batch) {
		return
	}
	for _, f := range batch {
		f.ack, f.tried = &jetstream.PubAck{Stream: VerdictsStream}, true
	}
	c.batches.batches.Add(1)
}

// publishBatch publishes batch as one atomic batch and reports whether the
// stream stored it.
func (c *Conn) publishBatch(batch []*firstVerdict) bool {
	// The leader's context bounds the batch; should it end, every verdict
	// of the batch goes the single way on its own caller's context.
	ctx := batch[0].ctx
	id := nuid.Next()
	for i, f := range batch {
		m := &nats.Msg{Subject: f.msg.Subject, Data: f.msg.Data, Header: make(nats.Header, len(f.msg.Header)+3)}
		for k, vs := range f.msg.Header {
			m.Header[k] = vs
		}
		m.Header.Set(batchIDHeader, id)
		m.Header.Set(batchSeqHeader, strconv.Itoa(i+1))
		if i < len(batch)-1 {
			// Staged without an answer: a refusal of any message is
			// answered on the commit.
			if err := c.nc.PublishMsg(m); err != nil {
				c.log.Debug("verdict batch not sent; its verdicts go one by one", zap.Int("verdicts", len(batch)), zap.Error(err))
				return false
			}
			continue
		}
		m.Header.Set(batchCommitHeader, "1")
		if _, err := c.js.PublishMsg(ctx, m); err != nil {
			var apiErr *jetstream.APIError
			if errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeAtomicDisabled {
				c.batches.on.Store(false)
				c.log.Warn("the verdict stream no longer allows atomic batches; verdicts are published one by one", zap.Error(err))
			} else {
				c.log.Debug("verdict batch refused; its verdicts go one by one", zap.Int("verdicts", len(batch)), zap.Error(err))
			}
			return false
		}
	}
	return true
}
