package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestNormalizeName(t *testing.T) {
	tests := []struct {
		in, want string
		err      error
	}{
		{"alice", "alice", nil},
		{"Alice", "alice", nil},
		{"lead", LeadName, nil},
		{"LEAD", LeadName, nil},
		{"team-lead", LeadName, nil},
		{"human", HumanName, nil},
		{"a.b_c-9", "a.b_c-9", nil},
		{strings.Repeat("a", 40), strings.Repeat("a", 40), nil},
		{strings.Repeat("a", 41), "", ErrInvalidName},
		{"", "", ErrInvalidName},
		{"-x", "", ErrInvalidName},
		{"../etc", "", ErrInvalidName},
		{"a b", "", ErrInvalidName},
		{"a/b", "", ErrInvalidName},
	}
	for _, tt := range tests {
		got, err := NormalizeName(tt.in)
		if got != tt.want || !errors.Is(err, tt.err) {
			t.Errorf("NormalizeName(%q) = %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
	for _, reserved := range []string{"human", "lead", "Lead"} {
		if _, err := NormalizeMemberName(reserved); !errors.Is(err, ErrInvalidName) {
			t.Errorf("NormalizeMemberName(%q) = %v, want ErrInvalidName", reserved, err)
		}
	}
}

func TestResolve(t *testing.T) {
	r := &Roster{Name: "t", Members: []Member{{Name: "alice"}, {Name: "bob"}}}
	if got, err := ResolveRecipient(r, "Lead"); err != nil || got != LeadName {
		t.Errorf("lead: %q %v", got, err)
	}
	_, err := ResolveRecipient(r, "carol")
	if !errors.Is(err, ErrUnknownMember) || !strings.Contains(err.Error(), "team-lead, alice, bob") {
		t.Errorf("unknown recipient: %v", err)
	}
	if _, err := ResolveRecipient(r, "human"); !errors.Is(err, ErrUnknownMember) {
		t.Errorf("human has no inbox: %v", err)
	}
	if got, err := ResolveSender(r, "human"); err != nil || got != HumanName {
		t.Errorf("human sender: %q %v", got, err)
	}
	if _, err := ResolveSender(r, "carol"); !errors.Is(err, ErrUnknownMember) {
		t.Errorf("unknown sender: %v", err)
	}
}

func TestNewIDOrderedAndUnique(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seen := map[string]bool{}
	prev := ""
	for i := range 1000 {
		id := NewID(base.Add(time.Duration(i)))
		if len(id) != 32 || seen[id] || id <= prev {
			t.Fatalf("id %d = %q (prev %q)", i, id, prev)
		}
		seen[id], prev = true, id
	}
}

func TestEventJSON(t *testing.T) {
	e := Event{TS: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Type: "claim", Team: "t", Agent: "alice",
		Fields: map[string]any{"task_id": "3"}}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"agent":"alice","task_id":"3","team":"t","ts":"2026-01-02T03:04:05.000000006Z","type":"claim"}`
	if string(b) != want {
		t.Errorf("event JSON\n got %s\nwant %s", b, want)
	}
	var back Event
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(e, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestParseMessageLine(t *testing.T) {
	ok := `{"id":"1","type":"shutdown_request","from":"team-lead","to":"alice","content":"stop","timestamp":"2026-01-01T00:00:00.5Z","request_id":"r1"}`
	m, err := ParseMessageLine([]byte(ok + "\n"))
	if err != nil || m.RequestID != "r1" || m.Timestamp.Nanosecond() != 5e8 {
		t.Fatalf("ParseMessageLine = %+v, %v", m, err)
	}
	for _, bad := range []string{
		``, `{}`, `[1]`, `{"id":"1"`,
		`{"id":"1","type":"gossip","from":"a","to":"b","timestamp":"2026-01-01T00:00:00Z"}`,
		`{"id":"","type":"message","from":"a","to":"b","timestamp":"2026-01-01T00:00:00Z"}`,
		`{"id":"1","type":"message","from":"a","to":"b"}`,
	} {
		if _, err := ParseMessageLine([]byte(bad)); !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("ParseMessageLine(%q) = %v, want ErrInvalidMessage", bad, err)
		}
	}
}

func TestParseTask(t *testing.T) {
	for _, bad := range []string{
		`{"id":"0","subject":"s","status":"pending"}`,
		`{"id":"01","subject":"s","status":"pending"}`,
		`{"id":"1","subject":"","status":"pending"}`,
		`{"id":"1","subject":"s","status":"done"}`,
		`{"id":"1","subject":"s","status":"pending","blocked_by":["x"]}`,
		`{"id":"1","subject":"s","status":"pending","blocks":["1"]}`,
		`not json`,
	} {
		if _, err := ParseTask([]byte(bad)); err == nil {
			t.Errorf("ParseTask(%s) accepted", bad)
		}
	}
	tk, err := ParseTask([]byte(`{"id":"12","subject":"s","status":"pending"}`))
	if err != nil || tk.BlockedBy == nil || tk.Metadata == nil {
		t.Errorf("ParseTask = %+v, %v", tk, err)
	}
}

// FuzzParseMessageLine: any bytes either fail cleanly or parse to a message
// that survives a write and a read unchanged.
func FuzzParseMessageLine(f *testing.F) {
	f.Add([]byte(`{"id":"1","type":"message","from":"human","to":"alice","content":"hi","timestamp":"2026-01-01T00:00:00.123456789Z"}` + "\n"))
	f.Add([]byte(`{"id":"2","type":"plan_approval_response","from":"team-lead","to":"a","content":"","timestamp":"2026-01-01T00:00:00Z","approve":false,"feedback":"no","tool_input":{"x":[1,2]}}`))
	f.Add([]byte(`{"id":"3","type":"message","from":"a","to":"b","content":"\u2028\n\"","timestamp":"2026-01-01T00:00:00+02:00"}`))
	f.Add([]byte(`{"id":`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMessageLine(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidMessage) {
				t.Fatalf("error not ErrInvalidMessage: %v", err)
			}
			return
		}
		line, err := MarshalMessageLine(&m)
		if err != nil {
			t.Fatalf("marshal parsed message: %v", err)
		}
		if bytes.Count(line, []byte("\n")) != 1 || line[len(line)-1] != '\n' {
			t.Fatalf("marshalled line is not one line: %q", line)
		}
		back, err := ParseMessageLine(line)
		if err != nil {
			t.Fatalf("re-parse %q: %v", line, err)
		}
		again, _ := MarshalMessageLine(&back)
		if !bytes.Equal(line, again) {
			t.Fatalf("not stable:\n%s\n%s", line, again)
		}
	})
}

// FuzzParseTask: any bytes either fail cleanly or parse to a valid task that
// survives a write and a read unchanged.
func FuzzParseTask(f *testing.F) {
	f.Add([]byte(`{"id":"1","subject":"s","description":"d","active_form":"doing","status":"pending","owner":"","blocked_by":["2"],"blocks":[],"metadata":{"k":[1,{"a":null}]},"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"id":"10","subject":"x","status":"completed"}`))
	f.Add([]byte(`{"id":"1","subject":"x","status":"pending","blocks":["1"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tk, err := ParseTask(data)
		if err != nil {
			return
		}
		if err := ValidateTask(&tk); err != nil {
			t.Fatalf("parsed task is invalid: %v", err)
		}
		out, err := MarshalTask(&tk)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		back, err := ParseTask(out)
		if err != nil {
			t.Fatalf("re-parse %s: %v", out, err)
		}
		again, _ := MarshalTask(&back)
		if !bytes.Equal(out, again) {
			t.Fatalf("not stable:\n%s\n%s", out, again)
		}
	})
}

func TestTaskLineAndAddTaskIDs(t *testing.T) {
	task := Task{ID: "3", Status: TaskPending, Subject: "Ship it", Owner: "ann",
		Metadata: map[string]any{"role": "dev"}, BlockedBy: []string{"1", "2"}}
	if got, want := task.Line(), "#3 [pending] Ship it (owner: ann) (role: dev) (blocked by: #1, #2)"; got != want {
		t.Errorf("Line() = %q, want %q", got, want)
	}
	if got, want := (Task{ID: "4", Status: TaskCompleted, Subject: "Done"}).Line(), "#4 [completed] Done"; got != want {
		t.Errorf("Line() = %q, want %q", got, want)
	}
	got := AddTaskIDs([]string{"1"}, []string{"#2", " 1 ", "", "2", "3"})
	if want := []string{"1", "2", "3"}; !slices.Equal(got, want) {
		t.Errorf("AddTaskIDs = %v, want %v", got, want)
	}
}

// TestSameMember: SameMember tells apart two members that differ in any
// one field, as reflect.DeepEqual does, and covers every field of
// Member (a field added to it must be added to memberFields).
func TestSameMember(t *testing.T) {
	if !memberFieldsKnown {
		t.Fatalf("Member's fields are not memberFields %v: add the new field to memberFields and SameMember", memberFields)
	}
	base := Member{Name: "a", MCPServers: []string{"x"}, HeartbeatAt: time.Unix(1, 0).UTC(), JoinedAt: time.Unix(2, 0).UTC()}
	if !SameMember(&base, &base) {
		t.Fatal("a member is not the same as itself")
	}
	v := reflect.ValueOf(&base).Elem()
	for i := range v.NumField() {
		changed := base
		changed.MCPServers = slices.Clone(base.MCPServers)
		f := reflect.ValueOf(&changed).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "!")
		case reflect.Int, reflect.Int64:
			f.SetInt(f.Int() + 1)
		case reflect.Float64:
			f.SetFloat(f.Float() + 1)
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Slice:
			f.Set(reflect.ValueOf([]string{"y"}))
		case reflect.Struct:
			f.Set(reflect.ValueOf(time.Unix(3, 0).UTC()))
		default:
			t.Fatalf("field %s of kind %s: the test cannot change it", v.Type().Field(i).Name, f.Kind())
		}
		if SameMember(&base, &changed) {
			t.Errorf("members differing in %s are the same to SameMember", v.Type().Field(i).Name)
		}
		if reflect.DeepEqual(base, changed) {
			t.Errorf("the test did not change %s", v.Type().Field(i).Name)
		}
	}
}

func TestHeartbeatsBack(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)
	roster := func(ms ...Member) *Roster { return &Roster{Members: ms} }
	m := func(name string, beat time.Duration) Member { return Member{Name: name, HeartbeatAt: t0.Add(beat)} }
	cur := roster(m("a", 10*time.Second), m("b", 10*time.Second), m("c", 10*time.Second))
	for _, tc := range []struct {
		name string
		next *Roster
		want []string
	}{
		{"unchanged", roster(m("a", 10*time.Second), m("b", 10*time.Second), m("c", 10*time.Second)), nil},
		{"forward", roster(m("a", 20*time.Second), m("b", 10*time.Second), m("c", 10*time.Second)), nil},
		{"back in place", roster(m("a", 10*time.Second), m("b", 0), m("c", 10*time.Second)), []string{"b"}},
		{"back after a reorder", roster(m("c", 0), m("a", 10*time.Second), m("b", 5*time.Second)), []string{"c", "b"}},
		{"a new member and one removed", roster(m("a", 0), m("d", 0), m("c", 10*time.Second)), []string{"a"}},
	} {
		if got := HeartbeatsBack(cur, tc.next); !slices.Equal(got, tc.want) {
			t.Errorf("%s: HeartbeatsBack = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// validName is NamePattern without the regexp: the two agree on every
// string of up to three characters from an alphabet of each kind of
// character, and at the length limit.
func TestValidNameIsNamePattern(t *testing.T) {
	alphabet := []string{"a", "z", "Z", "0", "9", ".", "_", "-", " ", "/", "\n", "é"}
	var names []string
	var grow func(prefix string, n int)
	grow = func(prefix string, n int) {
		names = append(names, prefix)
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			grow(prefix+c, n-1)
		}
	}
	grow("", 3)
	names = append(names, strings.Repeat("a", 40), strings.Repeat("a", 41), "a"+strings.Repeat("-", 39), "a"+strings.Repeat("-", 40))
	for _, n := range names {
		if got, want := validName(n), NamePattern.MatchString(n); got != want {
			t.Errorf("validName(%q) = %v, NamePattern says %v", n, got, want)
		}
	}
}
