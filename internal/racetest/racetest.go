// Package racetest is for tests that run their own binary as a child
// process (the CLI, teammate processes, store stress children). It must
// never be imported by non-test code.
package racetest

import (
	"os"
	"strings"
)

// QuickExit makes the race-built child processes a test starts exit as
// soon as they are done. The race runtime otherwise sleeps a second
// (GORACE atexit_sleep_ms, default 1000) whenever a process exits with
// status 0, which the CLI scripts alone pay a few hundred times per run.
// Races are reported when they happen, not at exit, so nothing is missed
// but a race between a process's last goroutines in its final instant.
// A GORACE the user set with its own atexit_sleep_ms is left alone. Call it
// from TestMain, before the first child starts: the race runtime reads
// GORACE once, at a process's start.
func QuickExit() {
	v := os.Getenv("GORACE")
	if strings.Contains(v, "atexit_sleep_ms") {
		return
	}
	os.Setenv("GORACE", strings.TrimSpace(v+" atexit_sleep_ms=0"))
}
