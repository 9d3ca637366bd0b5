package kind

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNamesRoundTrip(t *testing.T) {
	for _, k := range All() {
		b, err := json.Marshal(k)
		if err != nil {
			t.Fatalf("marshal %d: %v", k, err)
		}
		if string(b) != `"`+k.String()+`"` {
			t.Errorf("%s marshals as %s", k, b)
		}
		var back Kind
		if err := json.Unmarshal(b, &back); err != nil || back != k {
			t.Errorf("%s: unmarshal %s = %s, %v", k, b, back, err)
		}
	}
	if _, err := Parse("write"); err == nil {
		t.Error(`Parse("write") succeeded`)
	}
	if _, err := json.Marshal(Kind(42)); err == nil {
		t.Error("a kind outside the list marshals")
	}
	if got := Kind(42).String(); got != "kind(42)" {
		t.Errorf("Kind(42) = %q", got)
	}
}

func TestZeroIsUnknown(t *testing.T) {
	var k Kind
	if k != Unknown || !k.Changes() {
		t.Errorf("the zero kind is %s (changes %v), want unknown, which may change anything", k, k.Changes())
	}
}

func TestChanges(t *testing.T) {
	got := map[string]bool{}
	for _, k := range All() {
		got[k.String()] = k.Changes()
	}
	want := map[string]bool{"read": false, "edit": true, "execute": true, "network": false, "manage": false, "unknown": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Changes (-want +got):\n%s", diff)
	}
}
