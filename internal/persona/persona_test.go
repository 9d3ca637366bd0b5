package persona

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestBuiltinExample(t *testing.T) {
	ex, ok := Load("").Lookup("example")
	if !ok {
		t.Fatal("no example theme")
	}
	if len(ex.Characters) < 6 {
		t.Errorf("the example has %d characters, want enough for a fixed-theme team of 6", len(ex.Characters))
	}
	words := ex.GuardWords()
	for _, w := range []string{"Saltmarsh Light", "Saltmarsh", "Marlow", "Wren"} {
		if !strings.Contains(strings.Join(words, "|"), w) {
			t.Errorf("guard words %q lack %q", words, w)
		}
	}
	for _, w := range words {
		if strings.EqualFold(w, "example") {
			t.Error("the theme's id is guarded: every file saying \"example\" would be refused")
		}
	}
}

func TestLoadUserThemes(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "config.json"), `{"default_pattern": "mixed-genius"}`)
	writeFile(t, filepath.Join(dir, "orchard.json"), `{"title": "Pear Orchard", "characters": [{"name": "Quince", "role": "lead", "voice": "slow"}, {"name": "Medlar", "aliases": ["Med"]}]}`)
	writeFile(t, filepath.Join(dir, "broken.json"), `{`)
	writeFile(t, filepath.Join(dir, "typo.json"), `{"charactrs": []}`)
	writeFile(t, filepath.Join(dir, "empty.json"), `{"characters": []}`)
	writeFile(t, filepath.Join(dir, "twice.json"), `{"characters": [{"name": "A"}, {"name": "a"}]}`)
	s := Load(dir)
	got, ok := s.Lookup("Pear Orchard")
	want := Theme{Name: "orchard", Title: "Pear Orchard", Characters: []Character{{Name: "Quince", Role: "lead", Voice: "slow"}, {Name: "Medlar", Aliases: []string{"Med"}}},
		Source: filepath.Join(dir, "orchard.json")}
	if diff := cmp.Diff(want, got); !ok || diff != "" {
		t.Errorf("orchard (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Pear Orchard", "Quince", "Medlar", "Med"}, got.GuardWords()); diff != "" {
		t.Errorf("guard words:\n%s", diff)
	}
	if c, ok := got.Character("med"); !ok || c.Name != "Medlar" {
		t.Errorf("alias lookup: %v %v", c, ok)
	}
	if len(s.Warnings) != 4 {
		t.Errorf("warnings = %q, want 4 (config.json is not a theme)", s.Warnings)
	}
	if diff := cmp.Diff([]string{"example", "orchard"}, s.Names()); diff != "" {
		t.Error(diff)
	}
}

func TestPickAvoidsRecentThemes(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "orchard.json"), `{"characters": [{"name": "Quince"}]}`)
	writeFile(t, filepath.Join(dir, "quarry.json"), `{"characters": [{"name": "Flint"}]}`)
	s := Load(dir)
	tests := []struct {
		name    string
		asked   string
		history []Entry
		want    string
	}{
		{"nothing used: the first of the workspace's", "", nil, "orchard"},
		{"the last one avoided", "", []Entry{{Theme: "orchard"}}, "quarry"},
		{"all used: the oldest", "", []Entry{{Theme: "quarry"}, {Theme: "example"}, {Theme: "orchard"}}, "orchard"},
		{"never used wins over old", "", []Entry{{Theme: "quarry"}, {Theme: "example"}}, "orchard"},
		{"named wins over history", "example", []Entry{{Theme: "example"}}, "example"},
	}
	for _, tt := range tests {
		got, err := s.Pick(tt.asked, tt.history)
		if err != nil || got.Name != tt.want {
			t.Errorf("%s: Pick = %s, %v; want %s", tt.name, got.Name, err, tt.want)
		}
	}
	if got, _ := Load("").Pick("", []Entry{{Theme: "example"}}); got.Name != "example" {
		t.Errorf("with no themes of its own the example is played: %s", got.Name)
	}
	if _, err := s.Pick("nope", nil); err == nil || !strings.Contains(err.Error(), "example, orchard, quarry") {
		t.Errorf("unknown theme: %v", err)
	}
}

func TestCast(t *testing.T) {
	ex, _ := Load("").Lookup("example")
	names := func(cs []Character) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	got, err := Cast(ex, nil, 3, nil)
	if err != nil || !cmp.Equal([]string{"Marlow", "Wren", "Tamsin"}, names(got)) {
		t.Errorf("plain cast: %v, %v", names(got), err)
	}
	got, _ = Cast(ex, nil, 3, []Entry{{Characters: []string{"Marlow", "Wren"}}})
	if diff := cmp.Diff([]string{"Tamsin", "Oswin", "Bexley"}, names(got)); diff != "" {
		t.Errorf("recent characters not avoided:\n%s", diff)
	}
	got, _ = Cast(ex, []string{"bexley", "Bexley"}, 2, nil)
	if diff := cmp.Diff([]string{"Bexley", "Marlow"}, names(got)); diff != "" {
		t.Errorf("named first:\n%s", diff)
	}
	if _, err := Cast(ex, []string{"Nobody"}, 2, nil); err == nil || !strings.Contains(err.Error(), "Marlow") {
		t.Errorf("unknown character: %v", err)
	}
	if got, _ := Cast(ex, nil, 50, nil); len(got) != len(ex.Characters) {
		t.Errorf("more than the theme has: %d", len(got))
	}
}

func TestHistoryNewestFirst(t *testing.T) {
	h := NewHistory(filepath.Join(t.TempDir(), "home", ".claude", HistoryFile))
	if got, err := h.Read(); err != nil || got != nil {
		t.Fatalf("empty: %v %v", got, err)
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a := Entry{Pattern: "fixed-theme", Theme: "example", Characters: []string{"Marlow", "Wren"}, Team: "a", Time: t0}
	b := Entry{Pattern: "mixed-genius", Theme: "orchard", Characters: []string{"Quince"}, Team: "b", Time: t0.Add(time.Hour)}
	for _, e := range []Entry{a, b} {
		if err := h.Prepend(e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := h.Read()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Entry{b, a}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	data, _ := os.ReadFile(h.Path())
	if !strings.HasPrefix(strings.TrimSpace(string(data)), "[") || !strings.Contains(string(data), `"characters"`) {
		t.Errorf("not seed 004's JSON array:\n%s", data)
	}
}

func TestHistoryBrokenFileKept(t *testing.T) {
	h := NewHistory(filepath.Join(t.TempDir(), HistoryFile))
	writeFile(t, h.Path(), "not json")
	if _, err := h.Read(); err == nil || !strings.Contains(err.Error(), h.Path()) {
		t.Errorf("Read of a broken file: %v", err)
	}
	if err := h.Prepend(Entry{Theme: "example"}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(h.Path() + ".bad"); err != nil || string(b) != "not json" {
		t.Errorf("the broken file was not kept: %q %v", b, err)
	}
	if got, _ := h.Read(); len(got) != 1 {
		t.Errorf("after prepend: %v", got)
	}
}

func TestHistoryConcurrentPrepends(t *testing.T) {
	h := NewHistory(filepath.Join(t.TempDir(), HistoryFile))
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if err := h.Prepend(Entry{Theme: "t", Characters: []string{strings.Repeat("x", 1000)}}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, err := h.Read()
	if err != nil || len(got) != 20 {
		t.Errorf("%d entries, %v", len(got), err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"name": "x", "characters": [{"name": "A", "role": "lead"}]}`))
	f.Add([]byte(`{"characters": {}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		th, err := Parse(data, "fuzz")
		if err == nil && (!nameRE().MatchString(th.Name) || len(th.Characters) == 0) {
			t.Fatalf("accepted %+v", th)
		}
	})
}
