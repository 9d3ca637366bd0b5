package permission

import (
	"testing"
)

var benchLines = []string{
	`git status --short`,
	`go test ./... 2>&1 | tee logs/test.txt`,
	`if [ -f go.mod ]; then go vet ./...; else echo none; fi`,
	`find . -name '*.go' -not -path './vendor/*' | xargs grep -n TODO | head -50`,
	`FOO=1 timeout 30 env -i nice -n 5 bash -c 'make build && ./bin/app --version' > /dev/null`,
	`for f in $(ls src); do cat "src/$f" | wc -l; done`,
}

func benchPolicy(b testing.TB) *Policy {
	p, err := New("/w",
		Rules("Bash(git status:*)", "Bash(go test:*)", "Bash(make:*)", "Edit(logs/**)"),
		Rules("Bash(rm -rf:*)", "Bash(git push:*)", "Bash(curl:*)", "Read(./secrets/**)", "Edit(.env)"),
		Rules("Bash(git commit:*)"))
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func BenchmarkCheckBash(b *testing.B) {
	p := benchPolicy(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = p.Check(Default, bash(benchLines[i%len(benchLines)]))
	}
}

// FuzzCheckBash: no command line panics the check, a refusal by a rule is
// hard, and a deny rule refuses in every mode alike.
func FuzzCheckBash(f *testing.F) {
	for _, s := range append(benchLines, `rm -rf d`, `sh -c 'eval "rm -rf $x"'`, `find . -exec rm -rf {} +`, "echo `x`", `a=$((1+$(rm -rf d)))`, `cat <<EOF
$(rm -rf d)
EOF`, `{rm,-rf,d}`, `$'\x72m' -rf d`, `xargs -I{} sh -c 'rm -rf {}'`) {
		f.Add(s)
	}
	p := benchPolicy(f)
	f.Fuzz(func(t *testing.T, cmd string) {
		def := p.Check(Default, bash(cmd))
		byp := p.Check(Bypass, bash(cmd))
		if def.Effect == Deny && def.Rule != "" && !def.Hard {
			t.Fatalf("%q: a rule's refusal that is not hard: %+v", cmd, def)
		}
		if (def.Effect == Deny) != (byp.Effect == Deny) {
			t.Fatalf("%q: default %s (%s) but bypass %s (%s)", cmd, def.Effect, def.Reason, byp.Effect, byp.Reason)
		}
	})
}
