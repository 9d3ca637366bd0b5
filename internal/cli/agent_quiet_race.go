//go:build race

package cli

// quietIdleProcess does nothing in race builds: see agent_quiet.go.
func quietIdleProcess() {}
