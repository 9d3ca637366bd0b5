package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// memBoard is the smallest backend of the board rules: a map, copied into
// each transaction and swapped back whole on commit, as a compare-and-set
// store would.
type memBoard struct {
	tasks map[string]Task
	hwm   uint64
}

type memTx struct {
	b     *memBoard
	tasks map[string]Task
	hwm   uint64
}

func (b *memBoard) do(fn func(BoardTx) error) error {
	x := &memTx{b: b, tasks: map[string]Task{}, hwm: b.hwm}
	for id, t := range b.tasks {
		x.tasks[id] = t
	}
	if err := fn(x); err != nil {
		return err
	}
	b.tasks, b.hwm = x.tasks, x.hwm
	return nil
}

func (x *memTx) Get(id string) (Task, error) {
	t, ok := x.tasks[id]
	if !ok {
		return Task{}, fmt.Errorf("task %s: %w", id, ErrTaskNotFound)
	}
	return t, nil
}
func (x *memTx) Put(t Task)       { x.tasks[t.ID] = t }
func (x *memTx) Remove(id string) { delete(x.tasks, id) }
func (x *memTx) IDs() ([]string, error) {
	var ids []string
	for id := range x.tasks {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, CompareTaskIDs)
	return ids, nil
}
func (x *memTx) NextID() (string, error) {
	x.hwm++
	return strconv.FormatUint(x.hwm, 10), nil
}

// links renders the board as "id:status:owner:blockedBy/blocks" lines.
func (b *memBoard) links() []string {
	var out []string
	ids := make([]string, 0, len(b.tasks))
	for id := range b.tasks {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, CompareTaskIDs)
	for _, id := range ids {
		t := b.tasks[id]
		out = append(out, fmt.Sprintf("%s:%s:%s:%s/%s", id, t.Status, t.Owner, strings.Join(t.BlockedBy, ","), strings.Join(t.Blocks, ",")))
	}
	return out
}

func TestBoardRules(t *testing.T) {
	now := time.Unix(100, 0)
	deps := func(by ...string) func(*Task) error {
		return func(t *Task) error { t.BlockedBy = by; return nil }
	}
	status := func(s string) func(*Task) error {
		return func(t *Task) error { t.Status = s; return nil }
	}
	// An op is one rule run in its own transaction.
	type op func(BoardTx) error
	create := func(t Task) op { return func(x BoardTx) error { _, err := CreateTask(x, t, now); return err } }
	update := func(id string, fn func(*Task) error) op {
		return func(x BoardTx) error { _, err := UpdateTask(x, id, fn, now); return err }
	}
	claim := func(id, owner string) op {
		return func(x BoardTx) error { _, err := ClaimTask(x, id, owner, now); return err }
	}
	next := func(owner string) op {
		return func(x BoardTx) error { _, err := ClaimNextTask(x, owner, now); return err }
	}
	tests := []struct {
		name    string
		ops     []op
		wantErr error
		want    []string
	}{
		{"create links both sides", []op{create(Task{Subject: "a"}), create(Task{Subject: "b", BlockedBy: []string{"1"}})}, nil,
			[]string{"1:pending::/2", "2:pending::1/"}},
		{"blocks mirrors too", []op{create(Task{Subject: "a"}), create(Task{Subject: "b", Blocks: []string{"1"}})}, nil,
			[]string{"1:pending::2/", "2:pending::/1"}},
		{"indirect cycle refused, nothing written", []op{create(Task{Subject: "a"}), create(Task{Subject: "b", BlockedBy: []string{"1"}}),
			create(Task{Subject: "c", BlockedBy: []string{"2"}}), update("1", deps("3"))}, ErrCycle,
			[]string{"1:pending::/2", "2:pending::1/3", "3:pending::2/"}},
		{"self dependency refused", []op{create(Task{Subject: "a"}), update("1", deps("1"))}, ErrCycle, []string{"1:pending::/"}},
		{"unknown dependency refused", []op{create(Task{Subject: "a"}), update("1", deps("9"))}, ErrTaskNotFound, []string{"1:pending::/"}},
		{"completed unblocks", []op{create(Task{Subject: "a"}), create(Task{Subject: "b", BlockedBy: []string{"1"}}),
			update("1", status(TaskCompleted))}, nil, []string{"1:completed::/", "2:pending::/"}},
		{"completed blocker is no blocker", []op{create(Task{Subject: "a"}), update("1", status(TaskCompleted)),
			create(Task{Subject: "b", BlockedBy: []string{"1"}})}, nil, []string{"1:completed::/", "2:pending::/"}},
		{"deleted unlinks", []op{create(Task{Subject: "a"}), create(Task{Subject: "b", BlockedBy: []string{"1"}}),
			create(Task{Subject: "c", Blocks: []string{"1"}}), update("1", status(TaskDeleted))}, nil,
			[]string{"2:pending::/", "3:pending::/"}},
		{"claim a blocked task", []op{create(Task{Subject: "a"}), create(Task{Subject: "b", BlockedBy: []string{"1"}}), claim("2", "al")},
			ErrBlocked, []string{"1:pending::/2", "2:pending::1/"}},
		{"claim an owned task", []op{create(Task{Subject: "a", Owner: "bo"}), claim("1", "al")}, ErrClaimed, []string{"1:pending:bo:/"}},
		{"claim twice", []op{create(Task{Subject: "a"}), claim("1", "al"), claim("1", "bo")}, ErrNotPending,
			[]string{"1:in_progress:al:/"}},
		{"claim without owner", []op{create(Task{Subject: "a"}), claim("1", "")}, ErrInvalidName, []string{"1:pending::/"}},
		{"claim next takes the lowest claimable", []op{create(Task{Subject: "a"}), create(Task{Subject: "b", BlockedBy: []string{"1"}}),
			create(Task{Subject: "c"}), claim("1", "al"), next("bo"), next("cy")}, ErrNoTask,
			[]string{"1:in_progress:al:/2", "2:pending::1/", "3:in_progress:bo:/"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &memBoard{tasks: map[string]Task{}}
			var err error
			for _, o := range tt.ops {
				err = b.do(o)
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("last op: error %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, b.links()); diff != "" {
				t.Errorf("board (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDeletedIDNotReused: the rules take ids from NextID, never from the
// tasks left.
func TestDeletedIDNotReused(t *testing.T) {
	b := &memBoard{tasks: map[string]Task{}}
	var got Task
	for _, fn := range []func(BoardTx) error{
		func(x BoardTx) error { _, err := CreateTask(x, Task{Subject: "a"}, time.Now()); return err },
		func(x BoardTx) error {
			_, err := UpdateTask(x, "1", func(t *Task) error { t.Status = TaskDeleted; return nil }, time.Now())
			return err
		},
		func(x BoardTx) error {
			var err error
			got, err = CreateTask(x, Task{Subject: "b"}, time.Now())
			return err
		},
	} {
		if err := b.do(fn); err != nil {
			t.Fatal(err)
		}
	}
	if got.ID != "2" {
		t.Errorf("new task after a delete got id %s, want 2", got.ID)
	}
}

type fakeStore struct {
	Store
	u   *url.URL
	log *slog.Logger
}

// registerFake registers the scheme fake-test once (Register refuses a
// second time, and -count runs TestOpen again).
var registerFake = sync.OnceFunc(func() {
	Register("fake-test", func(ctx context.Context, u *url.URL, cfg OpenConfig) (Store, error) {
		if u.Opaque == "fail" {
			return nil, errors.New("no such place")
		}
		return &fakeStore{u: u, log: cfg.Logger}, nil
	})
})

func TestOpen(t *testing.T) {
	registerFake()
	log := slog.New(slog.DiscardHandler)
	s, err := Open(context.Background(), "FAKE-TEST:somewhere?x=1", WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	if f := s.(*fakeStore); f.u.Opaque != "somewhere" || f.u.Query().Get("x") != "1" || f.log != log {
		t.Errorf("opener got %+v", f)
	}
	for _, tt := range []struct {
		url, want string
		is        error
	}{
		{"nope:x", `unknown store scheme "nope" (known: `, ErrUnknownScheme},
		{".troupe", "has no scheme (known: ", ErrUnknownScheme},
		{"fake-test:fail", "no such place", nil},
		{"%zz", "invalid URL escape", nil},
	} {
		_, err := Open(context.Background(), tt.url)
		if err == nil || !strings.Contains(err.Error(), tt.want) || (tt.is != nil && !errors.Is(err, tt.is)) {
			t.Errorf("Open(%q) = %v, want an error with %q", tt.url, err, tt.want)
		}
		if tt.is != nil && !strings.Contains(err.Error(), "fake-test") {
			t.Errorf("Open(%q) = %v, want the known schemes listed", tt.url, err)
		}
	}
}
