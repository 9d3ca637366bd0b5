// Package teamkey keeps each team's secret key: 32 random bytes made when
// the team is created, with which troupe's own processes sign the team's
// protocol messages (see store/seal). The key lives outside the workspace,
// in a private directory of the user's state, so that an agent's file tools
// never reach it; a teammate process started by the lead receives it through
// an inherited pipe, never through its environment, which its tools would
// inherit.
//
// Keys are files named by a hash of the team's state directory and name:
//
//	$XDG_STATE_HOME/troupe/keys/<hex(sha256(abs state dir + "\x00" + team))[:32]>.key
//
// ($HOME/.local/state when XDG_STATE_HOME is unset), mode 0600 in a
// directory of mode 0700.
//
// The package knows nothing of teams beyond their names; it must never
// import the store or the team runtime.
package teamkey

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Size is the length of a team key in bytes.
const Size = 32

// Errors of the key store.
var (
	// ErrNoKey: the team has no key file (it was created before keys
	// existed, or its key was deleted).
	ErrNoKey = errors.New("team has no key")
	// ErrBadKey: a key file or descriptor does not hold a valid key, or the
	// file can be read by other users.
	ErrBadKey = errors.New("invalid team key")
	// ErrNoDir: no place for keys could be found (neither XDG_STATE_HOME nor
	// a home directory).
	ErrNoDir = errors.New("no directory for team keys")
)

// Options configure a key store.
type Options struct {
	// StateDir is the state directory whose teams the keys belong to
	// (made absolute).
	StateDir string
	// Dir is where key files go (default: DefaultDir()). Tests point it at
	// a temporary directory.
	Dir string
}

// Keys is the key store of one state directory's teams.
type Keys struct {
	dir      string // "" until first needed when defaulted
	dirErr   error
	stateDir string
}

// New returns the key store of opts.StateDir. A default directory that
// cannot be found is an error only when a key is used.
func New(opts Options) (*Keys, error) {
	abs, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("team keys: state dir %q: %w", opts.StateDir, err)
	}
	k := &Keys{dir: opts.Dir, stateDir: abs}
	if k.dir == "" {
		k.dir, k.dirErr = DefaultDir()
	}
	return k, nil
}

// DefaultDir is where key files go: $XDG_STATE_HOME/troupe/keys, else
// $HOME/.local/state/troupe/keys. Sandboxes and protected-path rules hide
// this directory from agents' tools.
func DefaultDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "troupe", "keys"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return "", fmt.Errorf("%w: set XDG_STATE_HOME or HOME", ErrNoDir)
	}
	return filepath.Join(home, ".local", "state", "troupe", "keys"), nil
}

// Dir returns the directory of the key files.
func (k *Keys) Dir() (string, error) { return k.dir, k.dirErr }

// Path returns the key file of team.
func (k *Keys) Path(team string) (string, error) {
	if k.dirErr != nil {
		return "", k.dirErr
	}
	sum := sha256.Sum256([]byte(k.stateDir + "\x00" + team))
	return filepath.Join(k.dir, hex.EncodeToString(sum[:16])+".key"), nil
}

// Create makes a new random key for team and stores it, replacing any key a
// former team of that name left behind.
func (k *Keys) Create(team string) ([]byte, error) {
	path, err := k.Path(team)
	if err != nil {
		return nil, err
	}
	key := make([]byte, Size)
	_, _ = rand.Read(key) // crypto/rand.Read never fails
	if err := os.MkdirAll(k.dir, 0o700); err != nil {
		return nil, fmt.Errorf("team %s: key directory: %w", team, err)
	}
	// MkdirAll leaves an existing directory's mode alone.
	if err := os.Chmod(k.dir, 0o700); err != nil {
		return nil, fmt.Errorf("team %s: key directory: %w", team, err)
	}
	tmp, err := os.CreateTemp(k.dir, ".key-*")
	if err != nil {
		return nil, fmt.Errorf("team %s: write key: %w", team, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err := tmp.Chmod(0o600); err == nil {
		if _, err = tmp.Write(key); err == nil {
			err = tmp.Sync()
		}
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return nil, fmt.Errorf("team %s: write key: %w", team, err)
	}
	return key, nil
}

// Load reads team's key (ErrNoKey when there is none). A key file that
// other users could read is refused: whoever read it could forge.
func (k *Keys) Load(team string) ([]byte, error) {
	path, err := k.Path(team)
	if err != nil {
		return nil, err
	}
	key, err := ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("team %s: %w (looked in %s)", team, ErrNoKey, path)
	}
	if err != nil {
		return nil, fmt.Errorf("team %s: %w", team, err)
	}
	return key, nil
}

// ReadFile reads a key file (a copy of a team's, for an agent on another
// machine). A file that other users could read is refused: whoever read it
// could forge.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %v, want 0600", ErrBadKey, path, st.Mode().Perm())
	}
	key, err := readKey(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return key, nil
}

// Ensure loads team's key, creating one if the team has none (a team made
// before keys existed). created says which.
func (k *Keys) Ensure(team string) (key []byte, created bool, err error) {
	key, err = k.Load(team)
	if errors.Is(err, ErrNoKey) {
		key, err = k.Create(team)
		return key, err == nil, err
	}
	return key, false, err
}

// Delete removes team's key; a team without one is not an error.
func (k *Keys) Delete(team string) error {
	path, err := k.Path(team)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("team %s: delete key: %w", team, err)
	}
	return nil
}

// Pipe returns the read end of a pipe that holds key and nothing else, for
// a child process to inherit (exec.Cmd.ExtraFiles). The caller closes it
// once the child has started. A pipe, unlike a file, leaves nothing to
// reopen through /proc once the child has read it.
func Pipe(key []byte) (*os.File, error) {
	if len(key) != Size {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrBadKey, len(key), Size)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("key pipe: %w", err)
	}
	// Size bytes fit in any pipe's buffer: this never blocks.
	_, err = w.Write(key)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("key pipe: %w", err)
	}
	return r, nil
}

// ReadFD reads the key from inherited file descriptor fd (see Pipe) and
// closes it.
func ReadFD(fd int) ([]byte, error) {
	if fd < 3 {
		return nil, fmt.Errorf("%w: key descriptor %d is a standard stream", ErrBadKey, fd)
	}
	f := os.NewFile(uintptr(fd), "team-key")
	if f == nil {
		return nil, fmt.Errorf("%w: no descriptor %d", ErrBadKey, fd)
	}
	defer f.Close()
	key, err := readKey(f)
	if err != nil {
		return nil, fmt.Errorf("key descriptor %d: %w", fd, err)
	}
	return key, nil
}

// readKey reads exactly Size bytes and checks nothing follows.
func readKey(r io.Reader) ([]byte, error) {
	buf := make([]byte, Size+1)
	n, err := io.ReadFull(r, buf)
	switch {
	case err == nil:
		return nil, fmt.Errorf("%w: more than %d bytes", ErrBadKey, Size)
	case errors.Is(err, io.ErrUnexpectedEOF) && n == Size:
		return buf[:Size], nil
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrBadKey, n, Size)
	default:
		return nil, err
	}
}
