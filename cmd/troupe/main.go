// Command troupe runs teams of LLM coding agents. See README.md.
package main

import (
	"net/http"
	"os"

	"github.com/troupe-dev/troupe/internal/cli"
	"github.com/troupe-dev/troupe/internal/llm"
)

func main() {
	// Before any request: the providers' default client uses it.
	llm.TuneTransport(http.DefaultTransport.(*http.Transport))
	os.Exit(cli.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
