package shell

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// helperEnv makes the test binary a stand-in troupe process (runHelper).
// With helperUnrecordedEnv, it stops before recording its command, which
// writes its child's pid to a file in that directory.
const (
	helperEnv           = "SHELL_TEST_HELPER_RECORDS"
	helperUnrecordedEnv = "SHELL_TEST_HELPER_UNRECORDED"
)

// runHelper starts a command whose background children would outlive a
// killed bash, records it in the directory named by helperEnv, prints the
// command's group and children, and waits to be killed.
func runHelper() {
	if err := SetRecordDir(os.Getenv(helperEnv)); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	cmd := `sleep 1000 & a=$!; setsid sleep 1000 & b=$!; echo "$$ $a $b"; wait`
	if dir := os.Getenv(helperUnrecordedEnv); dir != "" {
		// Stop between the command's start and its record, for ever: the
		// test kills this process there.
		testHookStarted = func() { select {} }
		cmd = `sleep 1000 & echo $! > ` + dir + `/child.tmp; mv ` + dir + `/child.tmp ` + dir + `/child; wait`
	}
	p, err := Start(context.Background(), Options{Command: cmd, Stream: os.Stdout})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	p.Wait()
	os.Exit(2) // never reached: the test kills this process
}

func TestEnviron(t *testing.T) {
	base := []string{
		"PATH=/bin", "HOME=/home/u", "ANTHROPIC_API_KEY=sk-1", "ANTHROPIC_AUTH_TOKEN=t", "ANTHROPIC_BASE_URL=http://u:p@h",
		"OPENAI_API_KEY=sk-2", "CLAUDE_CODE_OAUTH_TOKEN=o", "AWS_BEARER_TOKEN_BEDROCK=b", "TROUPE_HOME=/s",
		"GITHUB_TOKEN=g", "FOO=old", "NOEQUALS",
	}
	got := Environ(base, map[string]string{"FOO": "new", "OPENAI_API_KEY": "explicit", "BAR": "1"})
	want := []string{"PATH=/bin", "HOME=/home/u", "GITHUB_TOKEN=g", "BAR=1", "FOO=new", "OPENAI_API_KEY=explicit"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Environ (-want +got):\n%s", diff)
	}
}

// TestRunHidesKeys: neither env nor /proc/self/environ shows a provider
// key or troupe's own variables to a command run with the default
// environment.
func TestRunHidesKeys(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test-key-0001")
	t.Setenv("OPENAI_API_KEY", "sk-openai-test-key-0002")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "auth-token-test-0003")
	t.Setenv("TROUPE_HOME", "/state-dir-0004")
	t.Setenv("VISIBLE_TO_TOOLS", "yes-0005")
	got, err := Run(t.Context(), Options{Command: `env; cat /proc/self/environ | tr '\0' '\n'; sh -c env`})
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"0001", "0002", "0003", "0004", "ANTHROPIC_", "OPENAI_", "TROUPE_"} {
		if strings.Contains(got.Output, leak) {
			t.Errorf("the command saw %q:\n%s", leak, got.Output)
		}
	}
	if strings.Count(got.Output, "VISIBLE_TO_TOOLS=yes-0005") != 3 {
		t.Errorf("the ordinary variable is missing:\n%s", got.Output)
	}
}

// TestSetsidChildKilled: a child that left the process group is killed
// with the command when commands run in cgroups.
func TestSetsidChildKilled(t *testing.T) {
	if c, err := Containment(); c != "cgroup" {
		t.Skipf("commands are contained by their process group only here: %v", err)
	}
	got, err := Run(t.Context(), Options{Dir: t.TempDir(), Command: `setsid sh -c 'echo $$ > pid; exec sleep 1000' & while [ ! -s pid ]; do sleep 0.01; done; cat pid; sleep 1000 & echo $!`})
	if err != nil {
		t.Fatal(err)
	}
	assertGone(t, 0, pidsOf(t, got.Output))
}

// TestKill9BeforeRecord: a troupe killed after a command started and
// before it recorded the command's group leaves nothing behind either: the
// command's cgroup was told to the watchdog before the fork.
func TestKill9BeforeRecord(t *testing.T) {
	if c, err := Containment(); c != "cgroup" {
		t.Skipf("commands are contained by their process group only here, and a kill in that window can leave a child: %v", err)
	}
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	helper := exec.Command(exe, "-test.run=^$")
	helper.Env = append(os.Environ(), helperEnv+"="+t.TempDir(), helperUnrecordedEnv+"="+dir)
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	var child int
	deadline := time.Now().Add(10 * time.Second)
	for child == 0 {
		if data, err := os.ReadFile(filepath.Join(dir, "child")); err == nil {
			child, _ = strconv.Atoi(strings.TrimSpace(string(data)))
			break
		}
		if time.Now().After(deadline) {
			helper.Process.Kill()
			helper.Wait()
			t.Fatal("the command never wrote its child's pid")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if child <= 0 {
		helper.Process.Kill()
		helper.Wait()
		t.Fatal("the command wrote no pid")
	}
	helper.Process.Kill()
	helper.Wait()
	assertGone(t, 0, []int{child})
}

// TestKill9LeavesNoProcess: when the troupe process dies by SIGKILL, the
// command's bash (parent-death signal) and its children (watchdog, or the
// cgroup) die too; the record left behind names only dead processes.
func TestKill9LeavesNoProcess(t *testing.T) {
	records := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	helper := exec.Command(exe, "-test.run=^$")
	helper.Env = append(os.Environ(), helperEnv+"="+records)
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		helper.Process.Kill()
		helper.Wait()
		t.Fatalf("helper: %v", err)
	}
	f := strings.Fields(line)
	if len(f) != 3 {
		helper.Process.Kill()
		helper.Wait()
		t.Fatalf("helper said %q", line)
	}
	pgid, _ := strconv.Atoi(f[0])
	a, _ := strconv.Atoi(f[1])
	b, _ := strconv.Atoi(f[2])
	var rec record
	data, err := os.ReadFile(filepath.Join(records, strconv.Itoa(helper.Process.Pid)+".json"))
	if err != nil {
		t.Fatalf("no record of the running command: %v", err)
	}
	if err := json.Unmarshal(data, &rec); err != nil || len(rec.Groups) != 1 || rec.Groups[0].Pgid != pgid {
		t.Fatalf("record %s: %v", data, err)
	}
	if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	helper.Wait()
	pids := []int{pgid, a}
	if c, _ := Containment(); c == "cgroup" {
		pids = append(pids, b) // the setsid child too
	} else {
		t.Cleanup(func() { syscall.Kill(b, syscall.SIGKILL) })
	}
	assertGone(t, pgid, pids)
	if _, err := KillLeftovers(records); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(records); len(left) != 0 {
		t.Errorf("KillLeftovers left %v", left)
	}
}

// TestKillLeftovers: a group recorded by a dead troupe is killed, a group
// whose leader's start time differs (a reused pid) is not, and a record of
// a live troupe is left alone.
func TestKillLeftovers(t *testing.T) {
	dir := t.TempDir()
	start := func() *exec.Cmd {
		c := exec.Command("bash", "-c", "sleep 1000 & sleep 1000")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(-c.Process.Pid, syscall.SIGKILL); c.Wait() })
		return c
	}
	ours, reused, live := start(), start(), start()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	write := func(name string, r record) {
		data, _ := json.Marshal(r)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	group := func(c *exec.Cmd, delta uint64) Group {
		return Group{Pgid: c.Process.Pid, Start: readStart(c.Process.Pid) + delta, Command: "sleep"}
	}
	write("1.json", record{Pid: dead.Process.Pid, Start: 1, Groups: []Group{group(ours, 0), group(reused, 1)}})
	self := os.Getppid() // alive for the whole test
	write("2.json", record{Pid: self, Start: readStart(self), Groups: []Group{group(live, 0)}})
	write("3.json.tmp", record{})
	if err := os.WriteFile(filepath.Join(dir, "4.json"), []byte("{torn"), 0o644); err != nil {
		t.Fatal(err)
	}

	killed, err := KillLeftovers(dir)
	if err == nil || !strings.Contains(err.Error(), "4.json") {
		t.Errorf("KillLeftovers error = %v, want the torn record named", err)
	}
	if diff := cmp.Diff([]Group{group(ours, 0)}, killed); diff != "" {
		t.Errorf("killed (-want +got):\n%s", diff)
	}
	ours.Wait()
	assertGone(t, ours.Process.Pid, nil)
	for _, c := range []*exec.Cmd{reused, live} {
		if !GroupAlive(c.Process.Pid) {
			t.Errorf("group %d was killed", c.Process.Pid)
		}
	}
	var names []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{"2.json"}, names); diff != "" {
		t.Errorf("records left (-want +got):\n%s", diff)
	}
}

func TestKillLeftoversNoDir(t *testing.T) {
	killed, err := KillLeftovers(filepath.Join(t.TempDir(), "missing"))
	if err != nil || killed != nil {
		t.Errorf("got %v, %v; want nothing", killed, err)
	}
}

// TestRecordFollowsCommands: the record lists a running command and
// disappears once nothing runs.
func TestRecordFollowsCommands(t *testing.T) {
	dir := t.TempDir()
	if err := SetRecordDir(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { SetRecordDir("") })
	p, err := Start(t.Context(), Options{Command: "sleep 1000"})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(os.Getpid())+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	want := record{Pid: os.Getpid(), Start: readStart(os.Getpid()), Groups: []Group{{Pgid: p.Pid(), Start: readStart(p.Pid()), Cgroup: p.cgroup, Command: "sleep 1000"}}}
	if diff := cmp.Diff(want, rec); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
	p.Stop()
	if _, err := os.Stat(filepath.Join(dir, strconv.Itoa(os.Getpid())+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("record still there after the command ended: %v", err)
	}
}

// TestForgedCgroupRecordIgnored: a record naming a path that is not one of
// troupe's cgroups makes KillLeftovers touch nothing there.
func TestForgedCgroupRecordIgnored(t *testing.T) {
	dir, victim := t.TempDir(), t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(record{Pid: dead.Process.Pid, Start: 1, Groups: []Group{{Cgroup: victim}, {Cgroup: filepath.Join(victim, "troupe-1-1")}}})
	if err := os.WriteFile(filepath.Join(dir, "1.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(victim, "troupe-1-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := KillLeftovers(dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(victim, "troupe-1-1"), victim} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(victim, "cgroup.kill")); err == nil {
		t.Error("a cgroup.kill file was written outside any cgroup")
	}
}
