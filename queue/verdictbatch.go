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

// Headers of an atomic batch (NATS ADR-50); nats.go has no helper for them.
const (
	batchIDHeader     = "Nats-Batch-Id"
	batchSeqHeader    = "Nats-Batch-Sequence"
	batchCommitHeader = "Nats-Batch-Commit"
)

// errCodeAtomicDisabled: the stream does not allow atomic batches (e.g. an
// instance of an older release updated its configuration).
const errCodeAtomicDisabled jetstream.ErrorCode = 10174

type firstVerdict struct {
	ctx    context.Context
	msg    *nats.Msg // the verdict's message, with its conditions' headers
	stored bool      // set by the batch that stored it
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

// offerFirst offers msg, a first verdict carrying its conditions' headers,
// in a batch with the other first verdicts offered meanwhile. It reports
// whether the stream stored it; false leaves it to the single publish.
func (c *Conn) offerFirst(ctx context.Context, msg *nats.Msg) bool {
	b := &c.batches
	if !b.on.Load() {
		return false
	}
	f := &firstVerdict{ctx: ctx, msg: msg}
	b.q.Do(f, c.publishBatch)
	return f.stored
}

// publishBatch publishes group as one atomic batch when it holds more than
// one verdict. Two verdicts of one subject cannot share a batch (the
// server refuses the second's condition), so a repeated subject and a
// caller that has given up are left out.
func (c *Conn) publishBatch(group []*firstVerdict) {
	seen := make(map[string]bool, len(group))
	batch := group[:0:0]
	for _, f := range group {
		if f.ctx.Err() != nil || seen[f.msg.Subject] {
			continue
		}
		seen[f.msg.Subject] = true
		batch = append(batch, f)
	}
	if len(batch) < 2 {
		return // a batch of one costs more than the single publish
	}
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
				return
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
			return
		}
	}
	for _, f := range batch {
		f.stored = true
	}
	c.batches.batches.Add(1)
}
