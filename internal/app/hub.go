package app

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nats-io/nats-server/v2/server"

	natsstore "github.com/troupe-dev/troupe/internal/store/nats"
)

// HubConfig is what troupe hub runs: an embedded NATS JetStream server.
type HubConfig struct {
	// Addr is host:port to listen on.
	Addr string
	// Dir holds JetStream's files and the token (Dir/token).
	Dir string
	// Token is the clients' token; empty: the one kept in Dir/token, or a
	// new one written there.
	Token string
}

// Hub is a running embedded JetStream server.
type Hub struct {
	srv *server.Server
	// Token authenticates clients.
	Token string
	// URL is the --store URL clients use (the token not in it).
	URL string
}

// StartHub starts the hub and waits until it accepts clients.
func StartHub(c HubConfig) (*Hub, error) {
	host, portText, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return nil, usageError(fmt.Errorf("hub address %q: want host:port: %w", c.Addr, err))
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return nil, usageError(fmt.Errorf("hub address %q: bad port", c.Addr))
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, failure(err)
	}
	token := c.Token
	if token == "" {
		if token, err = hubToken(filepath.Join(c.Dir, "token")); err != nil {
			return nil, failure(err)
		}
	}
	srv, err := natsstore.StartServer(natsstore.ServerConfig{Host: host, Port: port, Dir: filepath.Join(c.Dir, "jetstream"), Token: token, ServerName: "troupe-hub"})
	if err != nil {
		return nil, failure(err)
	}
	addr := srv.Addr().(*net.TCPAddr)
	h := host
	if h == "" || h == "0.0.0.0" || h == "::" {
		h, _ = os.Hostname()
	}
	u := url.URL{Scheme: "nats", Host: net.JoinHostPort(h, strconv.Itoa(addr.Port))}
	return &Hub{srv: srv, Token: token, URL: u.String()}, nil
}

// hubToken reads the token kept at path, or makes one and keeps it there,
// so that clients keep working across restarts of the hub.
func hubToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err == nil && len(strings.TrimSpace(string(data))) >= 16 {
		return strings.TrimSpace(string(data)), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("hub token %s: %w", path, err)
	}
	var b [24]byte
	_, _ = rand.Read(b[:])
	tok := hex.EncodeToString(b[:])
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("hub token %s: %w", path, err)
	}
	return tok, nil
}

// Close stops the hub, flushing JetStream's state to disk.
func (h *Hub) Close() {
	h.srv.Shutdown()
	h.srv.WaitForShutdown()
}
