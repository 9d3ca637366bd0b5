//go:build unix

package shell

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/troupe-dev/troupe/internal/secret"
)

// Group is one running command as recorded for the case troupe dies
// without stopping it: its process group, its leader's start time (so
// that a reused pid is never taken for it) and its cgroup, if it has one.
type Group struct {
	Pgid    int    `json:"pgid"`
	Start   uint64 `json:"start"`
	Cgroup  string `json:"cgroup,omitempty"`
	Command string `json:"command,omitempty"`
}

// record is the file of one troupe process: <dir>/<pid>.json.
type record struct {
	Pid    int     `json:"pid"`
	Start  uint64  `json:"start"`
	Groups []Group `json:"groups"`
}

// tracker knows the groups of the commands this process runs. Each change
// goes to two places: the record file, which troupe resume reads after a
// crash, and the watchdog, a bash process outside troupe that kills the
// groups it was told of when troupe dies (it reads EOF on its pipe then,
// kill -9 included). Pdeathsig kills only a command's bash; the watchdog
// gets the processes bash started.
type tracker struct {
	mu       sync.Mutex
	dir      string
	groups   map[int]Group
	wd       *os.File // write end of the watchdog's stdin; nil until needed
	wrote    bool     // this process's record in dir is there
	reserved int      // the last key reserve handed out (negative)
}

var tracked = &tracker{groups: map[int]Group{}}

// SetRecordDir makes this process record the process groups of its
// running commands in dir/<pid>.json (troupe keeps them under the state
// directory's pids/), for KillLeftovers after a crash. An empty dir stops
// recording.
func SetRecordDir(dir string) error {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("record command groups: %w", err)
		}
	}
	tracked.mu.Lock()
	defer tracked.mu.Unlock()
	if dir != tracked.dir {
		tracked.wrote = false
	}
	tracked.dir = dir
	if dir != "" {
		// Pids repeat, from one run to the next in a container: a record
		// under our pid is a dead process's, to keep for KillLeftovers.
		path := filepath.Join(dir, strconv.Itoa(os.Getpid())+".json")
		if _, err := os.Stat(path); err == nil && !tracked.wrote {
			_ = os.Rename(path, filepath.Join(dir, fmt.Sprintf("%d-%d.json", os.Getpid(), time.Now().UnixNano())))
		}
	}
	return tracked.writeLocked()
}

// reserve tells the watchdog of cg, the cgroup made for a command about
// to start, under a key of its own (negative: there is no process group
// yet), and returns the key for add or release. A command is in its
// cgroup from its first instruction, so a troupe killed between the fork
// and add still has everything the command started killed: add comes
// after the fork, and a command can start children before it.
func (t *tracker) reserve(cg string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reserved--
	t.tellLocked(fmt.Sprintf("+ %d %s\n", t.reserved, cg))
	return t.reserved
}

// release forgets a reservation whose command did not start.
func (t *tracker) release(key int) {
	if key == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tellLocked(fmt.Sprintf("- %d\n", key))
}

// add records a started command's group; reserved, when not 0, is the
// reservation of its cgroup, which the group takes over.
func (t *tracker) add(g Group, reserved int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.groups[g.Pgid] = g
	line := fmt.Sprintf("+ %d %s\n", g.Pgid, g.Cgroup)
	if reserved != 0 {
		line += fmt.Sprintf("- %d\n", reserved) // after the group's line: the cgroup is never untold
	}
	t.tellLocked(line)
	_ = t.writeLocked() // a missing record costs a crash's cleanup, not the command
}

func (t *tracker) remove(pgid int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.groups, pgid)
	t.tellLocked(fmt.Sprintf("- %d\n", pgid))
	_ = t.writeLocked()
}

// watchdogScript keeps a table of the live groups and, at EOF (troupe is
// gone), kills each group and empties each cgroup.
const watchdogScript = `declare -A g
while read -r op id cg; do
  case $op in
    +) g[$id]=$cg ;;
    -) unset "g[$id]" ;;
  esac
done
for id in "${!g[@]}"; do
  kill -KILL -- "-$id" 2>/dev/null
  cg=${g[$id]}
  if [ -n "$cg" ]; then echo 1 > "$cg/cgroup.kill"; fi 2>/dev/null
done
for id in "${!g[@]}"; do
  cg=${g[$id]}
  [ -n "$cg" ] || continue
  for _ in 1 2 3 4 5 6 7 8 9 10; do rmdir "$cg" 2>/dev/null && break; sleep 0.05; done
done`

// tellLocked sends line to the watchdog, starting it when needed. A
// watchdog that cannot start leaves Pdeathsig and the records.
func (t *tracker) tellLocked(line string) {
	if t.wd == nil {
		t.wd = startWatchdog()
		if t.wd == nil {
			return
		}
	}
	if _, err := t.wd.WriteString(line); err != nil {
		t.wd.Close()
		t.wd = nil
	}
}

func startWatchdog() *os.File {
	bash, err := exec.LookPath("bash")
	if err != nil {
		return nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil
	}
	defer r.Close()
	cmd := exec.Command(bash, "-c", watchdogScript)
	cmd.Args[0] = "troupe-watchdog"
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	cmd.Dir = "/" // it must not keep a workspace busy
	cmd.Stdin = r
	// Its own group: a Ctrl-C to troupe's group must not take it first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil
	}
	// Never waited for: it outlives troupe by design.
	_ = cmd.Process.Release()
	return w
}

// writeLocked rewrites this process's record; with no group left it
// removes it.
func (t *tracker) writeLocked() error {
	if t.dir == "" {
		return nil
	}
	path := filepath.Join(t.dir, strconv.Itoa(os.Getpid())+".json")
	if len(t.groups) == 0 {
		if !t.wrote {
			return nil
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		t.wrote = false
		return nil
	}
	rec := record{Pid: os.Getpid(), Groups: make([]Group, 0, len(t.groups))}
	if st, ok := readStat(rec.Pid); ok {
		rec.Start = st.start
	}
	for _, g := range t.groups {
		rec.Groups = append(rec.Groups, g)
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	t.wrote = true
	return nil
}

// describeCommand is a command as recorded: short and with no secret.
func describeCommand(c string) string {
	c = secret.Redact(strings.Join(strings.Fields(c), " "))
	if r := []rune(c); len(r) > 120 {
		c = string(r[:117]) + "..."
	}
	return c
}

// KillLeftovers kills the command groups recorded in dir by troupe
// processes that are gone, and removes their records. A group is killed
// only while it is verifiably the recorded one: its leader, if still
// there, has the recorded start time, and every other member started
// after it, so a reused pid is never killed. It returns the groups it
// killed something of. A record of a troupe process that still runs is
// left alone.
func KillLeftovers(dir string) ([]Group, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("leftover commands: %w", err)
	}
	var killed []Group
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".tmp") {
			_ = os.Remove(filepath.Join(dir, name))
			continue
		}
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("leftover commands %s: %w", path, err))
			continue
		}
		var rec record
		if err := json.Unmarshal(data, &rec); err != nil {
			// Unreadable: nothing in it can be verified, so nothing is
			// killed; the file goes so that it is not reported forever.
			errs = append(errs, fmt.Errorf("leftover commands %s: %w (removed)", path, err))
			_ = os.Remove(path)
			continue
		}
		if rec.Pid == os.Getpid() && rec.Start == readStart(rec.Pid) {
			continue // this process's own
		}
		if st, ok := readStat(rec.Pid); ok && st.start == rec.Start && st.state != 'Z' {
			continue // that troupe still runs and owns its commands
		}
		for _, g := range rec.Groups {
			if killGroupRecord(g) {
				killed = append(killed, g)
			}
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return killed, errors.Join(errs...)
}

// killGroupRecord kills what is left of g and reports whether anything
// was.
func killGroupRecord(g Group) bool {
	any := false
	// A record is a file an agent's bash could have written: only a
	// cgroup troupe makes is touched, never a path it names.
	if g.Cgroup != "" && ownCgroup(g.Cgroup) {
		any = cgroupKill(g.Cgroup)
		cgroupRemove(g.Cgroup)
	}
	if g.Pgid <= 0 {
		return any
	}
	if st, ok := readStat(g.Pgid); ok {
		if st.pgid != g.Pgid || st.start != g.Start {
			return any // the pid was reused: not ours
		}
		_ = syscall.Kill(-g.Pgid, syscall.SIGKILL)
		return true
	}
	// The leader is gone; its group may live on. Kill the members that
	// started after it, one by one.
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return any
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok && st.pgid == g.Pgid && st.start >= g.Start && st.state != 'Z' {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			any = true
		}
	}
	return any
}
