package reconciled

import (
	"fmt"
	"time"
)

// OutcomeKind says how an intent delivery is settled.
type OutcomeKind int

const (
	// Ack: the intent is settled (a verdict is stored and published, or it
	// was refused); it leaves the work queue.
	Ack OutcomeKind = iota + 1
	// Nak: give it back for redelivery after Delay (possibly to another
	// instance); stored state makes the redelivery continue where this
	// one stopped.
	Nak
	// Term: it can never be handled (no intent id to answer on).
	Term
)

func (k OutcomeKind) String() string {
	switch k {
	case Ack:
		return "ack"
	case Nak:
		return "nak"
	case Term:
		return "term"
	}
	return fmt.Sprintf("OutcomeKind(%d)", int(k))
}

// Outcome is HandleIntent's answer to the intake.
type Outcome struct {
	Kind   OutcomeKind
	Delay  time.Duration // Nak only
	Reason string        // Term and Nak: for logs and advisories
}
