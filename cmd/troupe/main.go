// Command troupe runs teams of LLM coding agents. See README.md.
package main

import (
	"net/http"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/troupe-dev/troupe/internal/cli"
	"github.com/troupe-dev/troupe/internal/llm"
)

// gcPercent is the garbage collector's GOGC unless the environment sets
// one. A team's live heap is small (tens of MB for fifty teammates) while
// each turn makes garbage in proportion to its request and reply; at the
// runtime's default of 100 the collector took about a fifth of a busy
// team's CPU. At 200 it runs half as often: bench team's 50 teammates
// finish about a tenth faster, for a peak memory 14 % larger (27 % with
// 1000 idle teammates; README "Performance").
const gcPercent = 200

// minProcs is the fewest Ps (runtime.GOMAXPROCS) troupe runs with unless
// the environment sets GOMAXPROCS. A team's goroutines spend much of their
// time in fsync, and a goroutine blocked in a system call keeps its P
// until the runtime's monitor takes it back: on a two-core machine about
// one fsync is in flight at any time of a busy team's run, and with two Ps
// teammates that were ready to run waited while a core idled. With three,
// bench team on that machine's disk runs about a tenth faster, and 4 %
// slower on tmpfs, where an fsync returns at once; four Ps gained a little
// more on disk and lost 11 % on tmpfs (README "Performance"). Machines with
// more cores keep their default, and so does a teammate's own process
// (troupe agent), which runs one agent loop.
const minProcs = 3

func main() {
	tuneRuntime(os.Getenv, os.Args[1:])
	// Before any request: the providers' default client uses it.
	llm.TuneTransport(http.DefaultTransport.(*http.Transport))
	os.Exit(cli.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// tuneRuntime sets the collector's and the scheduler's figures that the
// environment leaves to their defaults, for the command args.
func tuneRuntime(getenv func(string) string, args []string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	agent := len(args) > 0 && args[0] == "agent"
	if getenv("GOMAXPROCS") == "" && !agent && runtime.GOMAXPROCS(0) < minProcs {
		runtime.GOMAXPROCS(minProcs)
	}
}
