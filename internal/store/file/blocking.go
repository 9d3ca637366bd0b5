package file

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// OnBlockingSync sets f to be called once per process if the stores'
// fsyncs turn out to block: the median of the first syncSamples of them
// (timed once f is set) took longer than blockingSync. On a disk an
// fsync waits for the device (0.1 ms and more); on tmpfs it returns at
// once. A goroutine blocked in a system call keeps its P until the Go
// runtime's monitor takes it back, so troupe's main gives the scheduler a
// P more when they block (cmd/troupe); on tmpfs the extra P only costs.
func OnBlockingSync(f func()) {
	if f == nil {
		onBlockingSync.Store(nil)
		return
	}
	onBlockingSync.Store(&f)
}

var onBlockingSync atomic.Pointer[func()]

const (
	syncSamples  = 16
	blockingSync = 50 * time.Microsecond
)

// syncSampler gathers the first fsyncs' durations until it has decided.
type syncSampler struct {
	mu      sync.Mutex
	decided atomic.Bool
	took    []time.Duration
}

// syncProbe is the process's sampler.
var syncProbe syncSampler

// timedSync runs fsync, timing it while the probe has not decided.
func timedSync(fsync func() error) error {
	if onBlockingSync.Load() == nil || syncProbe.decided.Load() {
		return fsync()
	}
	start := time.Now()
	err := fsync()
	if syncProbe.note(time.Since(start)) {
		if f := onBlockingSync.Load(); f != nil {
			(*f)()
		}
	}
	return err
}

// note adds one fsync's duration; it reports true once, at the sample
// that decides that fsyncs block.
func (p *syncSampler) note(d time.Duration) (blocking bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.decided.Load() {
		return false
	}
	p.took = append(p.took, d)
	if len(p.took) < syncSamples {
		return false
	}
	slices.Sort(p.took)
	blocking = p.took[len(p.took)/2] > blockingSync
	p.took = nil
	p.decided.Store(true)
	return blocking
}
