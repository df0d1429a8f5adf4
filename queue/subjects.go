package queue

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Stream names. They are fixed (not derived from the prefix) so that
// operators find the same names in every deployment.
const (
	IntentsStream  = "RECONCILE_INTENTS"
	VerdictsStream = "RECONCILE_VERDICTS"
)

// DefaultPrefix is the first subject token when none is configured.
const DefaultPrefix = "reconcile"

// Subjects builds the subjects of one deployment.
type Subjects struct {
	prefix string
}

// NewSubjects checks prefix (one or more dot-separated tokens) and returns
// the subject builder for it; "" selects DefaultPrefix.
func NewSubjects(prefix string) (Subjects, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	for _, tok := range strings.Split(prefix, ".") {
		if err := ValidToken(tok); err != nil {
			return Subjects{}, fmt.Errorf("queue: subject prefix %q: %w", prefix, err)
		}
	}
	return Subjects{prefix: prefix}, nil
}

// Prefix returns the configured prefix.
func (s Subjects) Prefix() string { return s.prefix }

// Intent returns <prefix>.intents.<canister_id>.
func (s Subjects) Intent(canisterID string) (string, error) {
	if err := ValidToken(canisterID); err != nil {
		return "", fmt.Errorf("queue: canister id %q: %w", canisterID, err)
	}
	return s.prefix + ".intents." + canisterID, nil
}

// Verdict returns <prefix>.verdicts.<intent_id>.
func (s Subjects) Verdict(intentID string) (string, error) {
	if err := ValidToken(intentID); err != nil {
		return "", fmt.Errorf("queue: intent id %q: %w", intentID, err)
	}
	return s.prefix + ".verdicts." + intentID, nil
}

// Reject returns <prefix>.rejects.<intent_id>.
func (s Subjects) Reject(intentID string) (string, error) {
	if err := ValidToken(intentID); err != nil {
		return "", fmt.Errorf("queue: intent id %q: %w", intentID, err)
	}
	return s.prefix + ".rejects." + intentID, nil
}

// IntentsFilter and VerdictsFilter are the streams' subject filters.
func (s Subjects) IntentsFilter() string  { return s.prefix + ".intents.>" }
func (s Subjects) VerdictsFilter() string { return s.prefix + ".verdicts.>" }

// maxTokenLen bounds a token well above the 128 characters of an intent id
// so a hostile publisher cannot build subjects of arbitrary size.
const maxTokenLen = 256

// ValidToken reports why tok cannot be a single subject token: an id with a
// '.' would publish into a different subject hierarchy, and '*' or '>' would
// turn a subscription into a wildcard that sees other intents' verdicts.
func ValidToken(tok string) error {
	if tok == "" {
		return fmt.Errorf("empty subject token")
	}
	if len(tok) > maxTokenLen {
		return fmt.Errorf("subject token longer than %d bytes", maxTokenLen)
	}
	if !utf8.ValidString(tok) {
		return fmt.Errorf("subject token is not valid UTF-8")
	}
	for _, r := range tok {
		switch {
		case r == '.' || r == '*' || r == '>':
			return fmt.Errorf("subject token contains %q", r)
		case unicode.IsSpace(r) || unicode.IsControl(r):
			return fmt.Errorf("subject token contains whitespace or a control character")
		}
	}
	return nil
}
