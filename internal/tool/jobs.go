package tool

// Jobs tracks one agent's background work: shell commands started with
// run_in_background and background subagents. (Being built.)
type Jobs struct{}
