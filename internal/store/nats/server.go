package nats

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ServerConfig is an embedded JetStream server: troupe hub runs one, and
// tests start them on random ports.
type ServerConfig struct {
	// Host and Port to listen on (Port -1: a random free port).
	Host string
	Port int
	// Dir holds JetStream's files.
	Dir string
	// Token, when set, is required of every client.
	Token string
	// ServerName names the server (needed in a cluster).
	ServerName string
	// Cluster joins a cluster: ClusterName, the route listen address and
	// the routes of the other nodes.
	ClusterName string
	ClusterHost string
	ClusterPort int
	Routes      []string
	// Log sends the server's own log to stderr.
	Log bool
}

// StartServer starts an embedded nats-server with JetStream and waits until
// it accepts clients.
func StartServer(c ServerConfig) (*server.Server, error) {
	opts := &server.Options{
		ServerName:         c.ServerName,
		Host:               c.Host,
		Port:               c.Port,
		JetStream:          true,
		StoreDir:           c.Dir,
		Authorization:      c.Token,
		NoSigs:             true,
		NoLog:              !c.Log,
		MaxPayload:         8 << 20,
		JetStreamMaxMemory: 64 << 20,
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if c.ClusterName != "" {
		opts.Cluster.Name = c.ClusterName
		opts.Cluster.Host = c.ClusterHost
		opts.Cluster.Port = c.ClusterPort
		routes, err := routeURLs(c.Routes)
		if err != nil {
			return nil, err
		}
		opts.Routes = routes
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	if c.Log {
		s.ConfigureLogger()
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("nats server on %s: not ready after 30s", net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)))
	}
	return s, nil
}

func routeURLs(routes []string) ([]*url.URL, error) {
	var out []*url.URL
	for _, r := range routes {
		u, err := url.Parse(r)
		if err != nil {
			return nil, fmt.Errorf("route %q: %w", r, err)
		}
		out = append(out, u)
	}
	return out, nil
}
