// Command troupe runs teams of LLM coding agents. See README.md.
package main

import (
	"net/http"
	"os"
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

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	// Before any request: the providers' default client uses it.
	llm.TuneTransport(http.DefaultTransport.(*http.Transport))
	os.Exit(cli.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
