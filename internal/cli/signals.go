package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// ExitInterrupted is the exit code of a run stopped by SIGINT or SIGTERM.
const ExitInterrupted = 130

// Run is Main with the process's signals: the first SIGINT or SIGTERM
// cancels the run, so every member stops gracefully (background jobs and
// child processes too) and the team stays resumable; a second one ends the
// process at once.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		if _, ok := <-sigs; !ok {
			return
		}
		fmt.Fprintln(stderr, "troupe: stopping the team; it stays resumable (a second signal forces the exit)")
		cancel()
		if _, ok := <-sigs; ok {
			fmt.Fprintln(stderr, "troupe: forced exit")
			os.Exit(ExitInterrupted)
		}
	}()
	return Main(ctx, args, stdin, stdout, stderr)
}
