package racetest

import (
	"os"
	"testing"
)

func TestQuickExit(t *testing.T) {
	tests := []struct{ name, before, want string }{
		{"unset", "", "atexit_sleep_ms=0"},
		{"other options kept", "halt_on_error=1", "halt_on_error=1 atexit_sleep_ms=0"},
		{"user's own value wins", "atexit_sleep_ms=50", "atexit_sleep_ms=50"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GORACE", tt.before)
			QuickExit()
			if got := os.Getenv("GORACE"); got != tt.want {
				t.Errorf("GORACE = %q, want %q", got, tt.want)
			}
		})
	}
}
