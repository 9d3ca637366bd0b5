package file

import (
	"context"
	"fmt"
	"os/signal"
	"strings"
	"syscall"

	"github.com/troupe-dev/troupe/internal/store"
)

// fsizeChild limits the size of the files it writes to limit bytes
// (RLIMIT_FSIZE, with SIGXFSZ ignored so the write fails with EFBIG instead
// of killing it), then sends a message that crosses the limit and prints
// the error.
func fsizeChild(dir string, limit int) int {
	signal.Ignore(syscall.SIGXFSZ)
	s, err := Open(dir, Options{})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer s.Close()
	tm, err := s.Team(context.Background(), "t1")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: uint64(limit), Max: uint64(limit)}); err != nil {
		fmt.Println(err)
		return 1
	}
	_, err = tm.Mailbox().Send(context.Background(), store.Message{From: "human", To: "alice", Content: strings.Repeat("x", 200)})
	fmt.Println("send:", err)
	if err == nil {
		return 1
	}
	return 0
}
