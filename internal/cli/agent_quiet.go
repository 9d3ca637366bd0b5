//go:build !race

package cli

import (
	"strings"
	_ "unsafe" // go:linkname

	// Linked for the embedded NATS server (troupe hub, nats:// stores);
	// named here for the variable below.
	_ "github.com/nats-io/nats-server/v2/server/pse"
)

// natsProcStatFile is the file nats-server's process sampler reads. Its
// package starts the sampler at init in every process that links it,
// troupe included, and re-arms it each second for good: in an idle
// teammate process that is the only thing that wakes it (and the Go
// runtime's monitor with it) between heartbeats.
//
//go:linkname natsProcStatFile github.com/nats-io/nats-server/v2/server/pse.procStatFile
var natsProcStatFile string

// quietIdleProcess stops nats-server's sampler in every troupe process but
// the hub's: none other runs a NATS server (only that server's monitoring reads the
// figure): the path becomes one its next read refuses (NUL bytes), and a
// sampler whose read fails does not re-arm. The sampler reads the variable
// on its own goroutine without a lock; the new value has the old one's
// length, so a read that meets the write half done sees either path,
// never a bad string. Race builds (the tests) leave the sampler be: the
// race detector would rightly report the unsynchronised write.
func quietIdleProcess() {
	natsProcStatFile = strings.Repeat("\x00", len(natsProcStatFile))
}
