package daemon

import (
	"errors"
	"testing"
	"time"
)

func TestCheckRetentionRefusesBelowHorizon(t *testing.T) {
	if err := CheckRetention(DefaultRetention, DefaultRepublishHorizon); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if err := CheckRetention(25*time.Hour, 25*time.Hour); err != nil {
		t.Fatalf("retention at the horizon: %v", err)
	}
	if err := CheckRetention(24*time.Hour, 25*time.Hour); !errors.Is(err, ErrRetentionTooShort) {
		t.Fatalf("retention below the horizon: %v, want ErrRetentionTooShort", err)
	}
	if err := CheckRetention(time.Hour, 0); err == nil {
		t.Fatal("a zero horizon was accepted")
	}
}
