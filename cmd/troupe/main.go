// Command troupe runs teams of LLM coding agents. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/troupe-dev/troupe/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
