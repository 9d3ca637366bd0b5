package team

import (
	"bytes"
	"testing"
)

// TestPoolKeySeal: the team's key opens only with the waiting agent's own
// private key, and a tampered seal is refused.
func TestPoolKeySeal(t *testing.T) {
	priv, pub, err := newPoolKey()
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := newPoolKey()
	if err != nil {
		t.Fatal(err)
	}
	key := bytes.Repeat([]byte{7}, 32)
	sealed, err := sealTeamKey(pub, key)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains([]byte(sealed), key) {
		t.Fatal("the key is readable in its seal")
	}
	got, err := openTeamKey(priv, sealed)
	if err != nil || !bytes.Equal(got, key) {
		t.Fatalf("openTeamKey = %x, %v; want %x", got, err, key)
	}
	tampered := []byte(sealed)
	tampered[len(tampered)-5] ^= 1
	for name, tc := range map[string]struct {
		open   func() ([]byte, error)
		wantOK bool
	}{
		"another agent": {func() ([]byte, error) { return openTeamKey(other, sealed) }, false},
		"tampered":      {func() ([]byte, error) { return openTeamKey(priv, string(tampered)) }, false},
		"not base64":    {func() ([]byte, error) { return openTeamKey(priv, "!!") }, false},
		"too short":     {func() ([]byte, error) { return openTeamKey(priv, "AAAA") }, false},
	} {
		if _, err := tc.open(); (err == nil) != tc.wantOK {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if _, err := sealTeamKey("not a key", key); err == nil {
		t.Error("sealTeamKey to a bad public key = nil error")
	}
}
