package bus

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server is a NATS server (with JetStream) embedded in this process.
type Server struct {
	srv *server.Server
	dir string // its JetStream store, removed at Shutdown when made for it
	own bool
}

// ServerConfig configures an embedded server.
type ServerConfig struct {
	Name string // the server's name; default "shareai"
	// Dir is where JetStream stores its data; "": a temporary directory, removed at Shutdown.
	Dir string
	// Port is the client port on 127.0.0.1; 0: any free one.
	Port int
	// Cluster names the cluster this server joins, ClusterPort is its route port on
	// 127.0.0.1, and Routes are the cluster's route URLs (nats-route://127.0.0.1:PORT, its
	// own may be among them).
	Cluster     string
	ClusterPort int
	Routes      []string
}

// Embed starts a NATS server with JetStream in this process, listening on 127.0.0.1.
func Embed(cfg ServerConfig) (*Server, error) {
	s := &Server{dir: cfg.Dir}
	if s.dir == "" {
		d, err := os.MkdirTemp("", "shareai-nats-")
		if err != nil {
			return nil, err
		}
		s.dir, s.own = d, true
	}
	name := cfg.Name
	if name == "" {
		name = "shareai"
	}
	port := cfg.Port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{ServerName: name, Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: s.dir,
		NoSigs: true, NoLog: os.Getenv("SHAREAI_NATS_LOG") == "", MaxPayload: 8 << 20}
	if cfg.Cluster != "" {
		opts.Cluster = server.ClusterOpts{Name: cfg.Cluster, Host: "127.0.0.1", Port: cfg.ClusterPort}
		for _, r := range cfg.Routes {
			u, err := parseURL(r)
			if err != nil {
				return nil, err
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		s.cleanup()
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	if !opts.NoLog {
		srv.ConfigureLogger()
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		s.cleanup()
		return nil, fmt.Errorf("embedded NATS %s did not start", name)
	}
	s.srv = srv
	return s, nil
}

// Cluster starts n servers clustered with each other (JetStream replicated over them), and
// returns them; Shutdown each.
func Cluster(n int) ([]*Server, error) {
	ports := make([]int, n)
	routes := make([]string, n)
	for i := range n {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i], routes[i] = p, fmt.Sprintf("nats-route://127.0.0.1:%d", p)
	}
	out := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n { // together: a clustered JetStream server is ready once it meets its peers
		wg.Go(func() {
			out[i], errs[i] = Embed(ServerConfig{Name: fmt.Sprintf("shareai-%d", i+1), Cluster: "shareai", ClusterPort: ports[i], Routes: routes})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, s := range out {
			if s != nil {
				s.Shutdown()
			}
		}
		return nil, err
	}
	return out, nil
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// URL is the server's client URL.
func (s *Server) URL() string { return s.srv.ClientURL() }

// Shutdown stops the server, and removes its store when it made it.
func (s *Server) Shutdown() {
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
	}
	s.cleanup()
}

func (s *Server) cleanup() {
	if s.own {
		os.RemoveAll(s.dir)
	}
}

// URLs joins servers' client URLs, as Config.URL takes them.
func URLs(servers []*Server) string {
	var us []string
	for _, s := range servers {
		us = append(us, s.URL())
	}
	return strings.Join(us, ",")
}
