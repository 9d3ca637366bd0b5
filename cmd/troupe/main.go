// Command troupe runs teams of LLM coding agents. See README.md.
package main

import (
	"os"

	"github.com/troupe-dev/troupe/internal/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
