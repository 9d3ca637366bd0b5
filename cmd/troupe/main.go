// Command troupe runs teams of LLM coding agents. See README.md.
package main

import (
	"net/http"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/troupe-dev/troupe/internal/cli"
	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store/file"
)

// gcPercent is the garbage collector's GOGC unless the environment sets
// one. A team's live heap is small (tens of MB for fifty teammates) while
// each turn makes garbage in proportion to its request and reply; at the
// runtime's default of 100 the collector took about a fifth of a busy
// team's CPU. At 200 it runs half as often: bench team's 50 teammates
// finish about a tenth faster, for a peak memory 14 % larger (27 % with
// 1000 idle teammates; README "Performance").
const gcPercent = 200

// minProcs is the fewest Ps (runtime.GOMAXPROCS) troupe runs with once
// its stores' fsyncs turn out to block (file.OnBlockingSync), unless the
// environment sets GOMAXPROCS. A team's goroutines spend much of their
// time in system calls that block on a disk (fsyncs, and file creations
// that ext4 without a journal makes slow), and a goroutine in a blocking
// system call keeps its P until the runtime's monitor takes it back: on a
// two-core machine teammates that were ready to run waited while a core
// idled. Medians of five interleaved rounds of bench team on that
// machine's disk: 431 tasks/s with two Ps, 522 with three, 554 with four,
// and no more beyond (six and eight gave 526 and 528 in rounds of their
// own); idle CPU and wake latency unchanged. On tmpfs, where an fsync
// returns at once, more Ps made it slower, so there the default stays
// (README "Performance"). Machines with more cores keep their default, and
// so does a teammate's own process (troupe agent), which runs one agent
// loop.
const minProcs = 4

func main() {
	if raise := tuneRuntime(os.Getenv, os.Args[1:]); raise != nil {
		file.OnBlockingSync(raise)
	}
	// Before any request: the providers' default client uses it.
	llm.TuneTransport(http.DefaultTransport.(*http.Transport))
	os.Exit(cli.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// tuneRuntime sets the collector's figure unless the environment does,
// and returns what raises the scheduler's Ps to minProcs once the stores'
// fsyncs block, or nil where they stay as they are (GOMAXPROCS set, or the
// command args are troupe agent's).
func tuneRuntime(getenv func(string) string, args []string) (raise func()) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	agent := len(args) > 0 && args[0] == "agent"
	if getenv("GOMAXPROCS") != "" || agent {
		return nil
	}
	return func() {
		if runtime.GOMAXPROCS(0) < minProcs {
			runtime.GOMAXPROCS(minProcs)
		}
	}
}
