package cli

import (
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/troupe-dev/troupe/internal/llm/fakeapi/fakeapitest"
)

// TestReferenceTurnLoop runs bench/reference_turn.py, the seeds' turn loop
// that README "Performance" times beside troupe's, for a few turns against
// the fake API answering as bench turn's does, so that the side-by-side
// keeps working.
func TestReferenceTurnLoop(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH to run the reference loop with")
	}
	srv := fakeapitest.StartTest(t, benchTurnScript)
	cmd := exec.Command(py, "../../bench/reference_turn.py", srv.URL(), "5")
	cmd.Env = append(cmd.Environ(), "ANTHROPIC_API_KEY=bench")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference_turn.py: %v\n%s", err, out)
	}
	var rep struct {
		Turns int     `json:"turns"`
		P50   float64 `json:"ms_per_turn_p50"`
		Model float64 `json:"model_ms_p50"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	if rep.Turns != 5 || rep.P50 <= 0 || rep.Model <= 0 {
		t.Errorf("report %+v from %s", rep, out)
	}
	recs := srv.Requests()
	if len(recs) != 5 {
		t.Fatalf("%d calls, want 5", len(recs))
	}
	for _, r := range recs {
		if r.Status != 200 || r.Stream {
			t.Errorf("call %d: status %d, stream %v; want 200, not streamed", r.N, r.Status, r.Stream)
		}
	}
}
