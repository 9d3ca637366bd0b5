package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"sync/atomic"
	"syscall"
)

// stopNotice is what the first SIGINT or SIGTERM prints; a command that
// runs no team (a server) says what it stops instead.
var stopNotice atomic.Pointer[string]

// setStopNotice makes the first signal print msg.
func setStopNotice(msg string) { stopNotice.Store(&msg) }

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
	// SIGUSR1 writes every goroutine's stack to a file in the temp
	// directory: what a stuck troupe is waiting for.
	dump := make(chan os.Signal, 1)
	signal.Notify(dump, syscall.SIGUSR1)
	defer signal.Stop(dump)
	go func() {
		for range dump {
			path := filepath.Join(os.TempDir(), fmt.Sprintf("troupe-%d-goroutines.txt", os.Getpid()))
			if f, err := os.Create(path); err == nil {
				_ = pprof.Lookup("goroutine").WriteTo(f, 2)
				f.Close()
			}
		}
	}()
	go func() {
		if _, ok := <-sigs; !ok {
			return
		}
		msg := "troupe: stopping the team; it stays resumable (a second signal forces the exit)"
		if p := stopNotice.Load(); p != nil {
			msg = *p
		}
		fmt.Fprintln(stderr, msg)
		cancel()
		if _, ok := <-sigs; ok {
			fmt.Fprintln(stderr, "troupe: forced exit")
			os.Exit(ExitInterrupted)
		}
	}()
	return Main(ctx, args, stdin, stdout, stderr)
}
