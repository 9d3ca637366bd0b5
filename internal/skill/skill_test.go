package skill

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// writeSkill writes dir/<sub>/SKILL.md and returns its path.
func writeSkill(t *testing.T, dir, sub, text string) string {
	t.Helper()
	path := filepath.Join(dir, sub, "SKILL.md")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func skillText(name, desc, body string) string {
	return "---\nname: " + name + "\ndescription: " + desc + "\n---\n" + body
}

// tempDir is t.TempDir with symlinks resolved, as Discover resolves them.
func tempDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func warningStrings(ws []Warning) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.String())
	}
	return out
}

func TestDiscover(t *testing.T) {
	ws := tempDir(t)
	user := tempDir(t)
	troupe := filepath.Join(ws, ".troupe", "skills")
	plain := filepath.Join(ws, "skills")
	claude := filepath.Join(ws, ".claude", "skills")

	writeSkill(t, troupe, "review", "---\nname: review\ndescription: |\n  Review a change.\n  Tests first.\n---\nReview body.\n")
	writeSkill(t, plain, "release", "---\nname: release\ndescription: >\n  Cut a\n  release.\n---\nRelease body.\n")
	dupPlain := writeSkill(t, plain, "review", skillText("review", "Shadowed review.", "other"))
	writeSkill(t, claude, "claude-only", skillText("claude-only", "From .claude.", "c"))
	dupClaude := writeSkill(t, claude, "rel2", skillText("release", "Shadowed release.", "r"))
	writeSkill(t, user, "mine", skillText("mine", "From the user's directory.", "m"))
	dupUser := writeSkill(t, user, "review", skillText("review", "User review.", "u"))

	// As in Claude Code, the folder names a skill whose front matter does
	// not, and the first paragraph describes it.
	writeSkill(t, plain, "nofm", "# No front matter\nat all.\n\nBody.\n")
	writeSkill(t, plain, "noname", "---\ndescription: d\n---\n")
	// Broken files are skipped with a warning each.
	badYAML := writeSkill(t, plain, "badyaml", "---\nname: [x\n---\n")
	noDesc := writeSkill(t, plain, "nodesc", "---\nname: nodesc\n---\n")
	badName := writeSkill(t, plain, "badname", skillText("Bad_Name", "d", ""))
	// Not skills at all: ignored without a word.
	if err := os.MkdirAll(filepath.Join(plain, "assets"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plain, "README.md"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeSkill(t, plain, ".hidden", skillText("hidden", "d", ""))

	set, warns := Discover(ws, Options{UserDir: user, ClaudeDir: tempDir(t)})

	wantWarns := []string{
		badName + `: invalid skill name "Bad_Name"`,
		badYAML + ": invalid YAML front matter",
		noDesc + ": front matter has no description",
		dupPlain + `: duplicate skill "review": already defined by ` + filepath.Join(troupe, "review", "SKILL.md"),
		dupClaude + `: duplicate skill "release": already defined by ` + filepath.Join(plain, "release", "SKILL.md"),
		dupUser + `: duplicate skill "review": already defined by ` + filepath.Join(troupe, "review", "SKILL.md"),
	}
	gotWarns := warningStrings(warns)
	if len(gotWarns) != len(wantWarns) {
		t.Fatalf("warnings:\n%s\nwant %d", strings.Join(gotWarns, "\n"), len(wantWarns))
	}
	for i := range wantWarns {
		if !strings.HasPrefix(gotWarns[i], wantWarns[i]) {
			t.Errorf("warning %d = %q, want prefix %q", i, gotWarns[i], wantWarns[i])
		}
	}

	if diff := cmp.Diff([]string{"claude-only", "mine", "nofm", "noname", "release", "review"}, set.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	got, _ := set.Get("review")
	want := Skill{
		Name:        "review",
		Description: "Review a change.\nTests first.",
		Body:        "Review body.",
		Path:        filepath.Join(troupe, "review", "SKILL.md"),
		Dir:         ".troupe/skills/review",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Get(review) (-want +got):\n%s", diff)
	}
	if got, _ := set.Get("mine"); got.Dir != filepath.Join(user, "mine") {
		t.Errorf("user skill Dir = %q, want the absolute %q", got.Dir, filepath.Join(user, "mine"))
	}

	wantPrompt := `<available-skills>
Skills are instructions for particular kinds of work. When a task matches a skill's description, load it with the Skill tool before you start, then follow it.
- claude-only: From .claude.
- mine: From the user's directory.
- nofm: No front matter at all.
- noname: d
- release: Cut a release.
- review: Review a change. Tests first.
</available-skills>`
	if diff := cmp.Diff(wantPrompt, set.Prompt()); diff != "" {
		t.Errorf("Prompt (-want +got):\n%s", diff)
	}
	// Byte-identical between runs.
	again, _ := Discover(ws, Options{UserDir: user, ClaudeDir: tempDir(t)})
	if again.Prompt() != set.Prompt() {
		t.Error("Prompt differs between two discoveries of the same files")
	}
}

func TestDiscoverNoUserAndDefaults(t *testing.T) {
	ws := tempDir(t)
	cfg := tempDir(t)
	t.Setenv("XDG_CONFIG_HOME", cfg) // os.UserConfigDir on Unix
	t.Setenv("HOME", cfg)            // and on darwin
	base, err := os.UserConfigDir()
	if err != nil {
		t.Skip("no user config dir:", err)
	}
	writeSkill(t, filepath.Join(base, "troupe", "skills"), "u", skillText("u", "user skill", ""))

	set, warns := Discover(ws, Options{})
	if len(warns) != 0 || !cmp.Equal(set.Names(), []string{"u"}) {
		t.Errorf("default user dir: names %v, warnings %v; want [u] and none", set.Names(), warningStrings(warns))
	}
	set, _ = Discover(ws, Options{NoUser: true})
	if set.Len() != 0 {
		t.Errorf("NoUser: names %v, want none", set.Names())
	}
	if set.Prompt() != "" {
		t.Errorf("empty set Prompt = %q, want empty", set.Prompt())
	}
}

func TestDiscoverTooLarge(t *testing.T) {
	ws := tempDir(t)
	path := writeSkill(t, filepath.Join(ws, "skills"), "big", skillText("big", "d", strings.Repeat("x", MaxFileSize)))
	set, warns := Discover(ws, Options{NoUser: true})
	if set.Len() != 0 || len(warns) != 1 || warns[0].Path != path || !errors.Is(warns[0].Err, ErrTooLarge) {
		t.Errorf("got names %v, warnings %v; want one ErrTooLarge warning for %s", set.Names(), warningStrings(warns), path)
	}
}

func TestLoad(t *testing.T) {
	ws := tempDir(t)
	writeSkill(t, filepath.Join(ws, "skills"), "pdf", skillText("pdf", "PDF forms.", "\n# PDF\n\nRun scripts/fill.py.\n\n"))
	writeSkill(t, filepath.Join(ws, ".claude", "skills"), "empty", skillText("empty", "Nothing inside.", ""))
	set, warns := Discover(ws, Options{NoUser: true})
	if len(warns) != 0 {
		t.Fatalf("warnings: %v", warningStrings(warns))
	}

	tests := []struct {
		name    string
		want    string
		wantErr string
	}{
		{name: "pdf", want: "<skill name=\"pdf\" dir=\"skills/pdf\">\n# PDF\n\nRun scripts/fill.py.\n</skill>"},
		{name: " pdf\n", want: "<skill name=\"pdf\" dir=\"skills/pdf\">\n# PDF\n\nRun scripts/fill.py.\n</skill>"},
		{name: "empty", want: "<skill name=\"empty\" dir=\".claude/skills/empty\">\n</skill>"},
		{name: "docx", wantErr: `unknown skill "docx"; the skills available are: empty, pdf`},
		{name: "", wantErr: `unknown skill ""; the skills available are: empty, pdf`},
	}
	for _, tt := range tests {
		got, err := set.Load(tt.name)
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
			if !errors.Is(err, ErrUnknown) {
				t.Errorf("Load(%q) error %v does not wrap ErrUnknown", tt.name, err)
			}
		}
		if diff := cmp.Diff(tt.wantErr, gotErr); diff != "" {
			t.Errorf("Load(%q) error (-want +got):\n%s", tt.name, diff)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Load(%q) (-want +got):\n%s", tt.name, diff)
		}
	}

	var none *Set
	if _, err := none.Load("pdf"); err == nil || !strings.Contains(err.Error(), "no skills are installed") {
		t.Errorf("nil set Load error = %v, want one saying no skills are installed", err)
	}
}

func TestPromptCutsLongDescriptions(t *testing.T) {
	ws := tempDir(t)
	long := strings.Repeat("word ", 100)
	writeSkill(t, filepath.Join(ws, "skills"), "long", skillText("long", long, ""))
	set, _ := Discover(ws, Options{NoUser: true})
	line := strings.Split(set.Prompt(), "\n")[2]
	if !strings.HasSuffix(line, "…") || len([]rune(line)) > len("- long: ")+maxPromptDescription {
		t.Errorf("prompt line = %q (%d runes), want a cut description", line, len([]rune(line)))
	}
	if sk, _ := set.Get("long"); sk.Description != strings.TrimSpace(long) {
		t.Error("the full description should stay in Skill.Description")
	}
}
