package shell

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Each command runs in a cgroup of its own when the cgroup v2 hierarchy
// lets troupe create one under its own cgroup (root, or a delegated
// subtree). A cgroup holds every process the command started, including
// one that left the process group with setsid, and cgroup.kill kills them
// all at once. Without it, a setsid child escapes the group kill: that is
// the documented limit, reported by Containment.
var cgroups struct {
	once     sync.Once
	base     string // the directory commands' cgroups are made in
	err      error  // why cgroups are not used
	disabled atomic.Bool
	next     atomic.Int64
}

// Containment reports how a command's processes are held together: "cgroup"
// when each command runs in a cgroup of its own (a setsid child is killed
// with the rest), else "process group", with the reason cgroups are not
// available.
func Containment() (string, error) {
	if _, err := cgroupBase(); err != nil {
		return "process group", err
	}
	return "cgroup", nil
}

func cgroupBase() (string, error) {
	cgroups.once.Do(func() { cgroups.base, cgroups.err = findCgroupBase() })
	if cgroups.err == nil && cgroups.disabled.Load() {
		return "", errors.New("creating a command's cgroup failed before; cgroups are off for this process")
	}
	return cgroups.base, cgroups.err
}

func findCgroupBase() (string, error) {
	mnt, root, err := cgroup2Mount()
	if err != nil {
		return "", err
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("cgroups: %w", err)
	}
	var path string
	found := false
	for _, l := range strings.Split(string(self), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			path, found = p, true
		}
	}
	if !found {
		return "", errors.New("cgroups: this process is in no cgroup v2")
	}
	if root != "/" {
		rel, ok := strings.CutPrefix(path, root)
		if !ok {
			return "", fmt.Errorf("cgroups: own cgroup %s is outside the mounted %s", path, root)
		}
		path = rel
	}
	base := filepath.Join(mnt, path)
	probe := filepath.Join(base, fmt.Sprintf("troupe-%d-probe", os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("cgroups: cannot create a cgroup under %s (not delegated to this user): %w", base, err)
	}
	defer os.Remove(probe)
	if _, err := os.Stat(filepath.Join(probe, "cgroup.kill")); err != nil {
		return "", fmt.Errorf("cgroups: no cgroup.kill (kernel older than 5.14): %w", err)
	}
	return base, nil
}

// cgroup2Mount finds where the cgroup v2 hierarchy is mounted and which of
// its directories the mount shows at that place.
func cgroup2Mount() (mnt, root string, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", "", fmt.Errorf("cgroups: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		if fs := strings.Fields(post); len(fs) == 0 || fs[0] != "cgroup2" {
			continue
		}
		fs := strings.Fields(pre)
		if len(fs) < 5 {
			continue
		}
		return fs[4], fs[3], nil
	}
	return "", "", errors.New("cgroups: no cgroup v2 hierarchy is mounted")
}

// newCgroup makes the cgroup of one command and opens it for
// CLONE_INTO_CGROUP, so that the command is in it from its first
// instruction.
func newCgroup() (path string, dir *os.File, ok bool) {
	base, err := cgroupBase()
	if err != nil {
		return "", nil, false
	}
	path = filepath.Join(base, fmt.Sprintf("troupe-%d-%d", os.Getpid(), cgroups.next.Add(1)))
	if err := os.Mkdir(path, 0o755); err != nil {
		cgroups.disabled.Store(true)
		return "", nil, false
	}
	dir, err = os.Open(path)
	if err != nil {
		os.Remove(path)
		cgroups.disabled.Store(true)
		return "", nil, false
	}
	return path, dir, true
}

// ownCgroup reports whether path names a command cgroup troupe makes: a
// troupe-<pid>-<n> directory in a cgroup v2 hierarchy.
func ownCgroup(path string) bool {
	if !ownCgroupName().MatchString(filepath.Base(path)) || !filepath.IsAbs(path) {
		return false
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(path), &st); err != nil {
		return false
	}
	return st.Type == cgroup2Magic
}

var ownCgroupName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^troupe-[0-9]+-[0-9]+$`) })

// cgroup2Magic is CGROUP2_SUPER_MAGIC, the filesystem type of cgroup v2.
const cgroup2Magic = 0x63677270

// cgroupKill kills every process of the cgroup at path and reports whether
// it had any.
func cgroupKill(path string) bool {
	procs, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
	if err != nil || len(bytes.TrimSpace(procs)) == 0 {
		return false
	}
	_ = os.WriteFile(filepath.Join(path, "cgroup.kill"), []byte("1"), 0)
	return true
}

// cgroupEmpty reports whether the cgroup at path holds no process (or is
// gone).
func cgroupEmpty(path string) bool {
	b, err := os.ReadFile(filepath.Join(path, "cgroup.events"))
	if err != nil {
		return true
	}
	return bytes.Contains(b, []byte("populated 0"))
}

// cgroupRemove waits, boundedly, for the killed cgroup to empty and removes
// it. SIGKILL is delivered asynchronously.
func cgroupRemove(path string) {
	deadline := time.Now().Add(goneWait)
	for !cgroupEmpty(path) && time.Now().Before(deadline) {
		_ = os.WriteFile(filepath.Join(path, "cgroup.kill"), []byte("1"), 0)
		time.Sleep(2 * time.Millisecond)
	}
	_ = os.Remove(path)
}

// intoCgroup makes cmd's process start in the cgroup opened as dir.
func intoCgroup(cmd *exec.Cmd, dir *os.File) {
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = int(dir.Fd())
}

func disableCgroups() { cgroups.disabled.Store(true) }
